#include "daemon/transport/tcp/tcp_tls.h"

#include <openssl/err.h>
#include <poll.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/common/openssl_util.h"
#include "daemon/common/x509_names.h"
#include "daemon/transport/tcp/tcp_ktls.h"
#include "daemon/transport/tcp/tcp_socket.h"

namespace xferd::transport::tcp {
namespace {

// AES-128-GCM first: the cheapest suite with AES-NI, and one the kernel's
// TLS offload takes; the others stay acceptable for peers that prefer them.
// OpenSSL's receive buffer per lane with read-ahead: four full records.
constexpr size_t kReadAheadBytes = 4 * (16384 + 256);

constexpr char kCipherSuites[] =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
// Where the daemon installs kernel receive: only the suites it derives keys
// for (tcp_ktls.h). Peers without kernel TLS offer these too.
constexpr char kKernelCipherSuites[] = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384";

absl::Status Refused(const char* what) {
  return absl::InvalidArgumentError(
      absl::StrCat("TCP lane TLS: ", what, ": ", OpenSslError("refused by OpenSSL")));
}

// The protocol settings both sides share: TLS 1.3 only, which suites, how
// records are buffered, no tickets, and what the kernel may take.
absl::Status ConfigureProtocol(SSL_CTX* ctx, KernelTls kernel, bool kernel_receive) {
  // TLS 1.3 only: no renegotiation, forward secrecy always, one round trip.
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  if (SSL_CTX_set_ciphersuites(ctx, kernel_receive ? kKernelCipherSuites : kCipherSuites) != 1) {
    return Refused("cipher suites");
  }
  // A peer that goes away closes its lanes without close_notify; that is a
  // closed lane, not an attack: frames are self-delimiting and a frame cut
  // short is never acknowledged, so a truncation cannot pass for data.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  if (kernel != KernelTls::kOff) SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
  if (kernel_receive) EnableKernelReceiveTracking(ctx);
  // Lanes write from region memory and retry from wherever the not yet sent
  // bytes are now; a partial write returns after each record, so a slow
  // socket never makes OpenSSL hold more than one record of a lane.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Read ahead: one recv fills OpenSSL's buffer with several records instead
  // of two recvs (header, body) per 16 KiB record. Lanes then check
  // SSL_has_pending, not the socket alone, before they wait. (Sessions
  // tracked for kernel receive read without it until they settle.)
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, kReadAheadBytes);
  // Every lane does a full handshake: no resumption state to steal or leak,
  // and no ticket record to count before kernel receive takes over.
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  return absl::OkStatus();
}

// Certificate chain, key and CA into `ctx`.
absl::Status ConfigureIdentity(SSL_CTX* ctx, const LaneTlsFiles& files) {
  UniqueX509Stack chain = ReadCertificates(files.cert_pem);
  if (sk_X509_num(chain.get()) == 0) {
    return absl::InvalidArgumentError("TCP lane TLS: tls.cert holds no certificate");
  }
  if (SSL_CTX_use_certificate(ctx, sk_X509_value(chain.get(), 0)) != 1) return Refused("tls.cert");
  for (int i = 1; i < sk_X509_num(chain.get()); ++i) {
    SSL_CTX_add1_chain_cert(ctx, sk_X509_value(chain.get(), i));
  }
  UniqueKey key = ReadPrivateKey(files.key_pem);
  if (key == nullptr || SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    return Refused("tls.key");
  }
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  UniqueX509Stack cas = ReadCertificates(files.ca_pem);
  if (sk_X509_num(cas.get()) == 0) {
    return absl::InvalidArgumentError("TCP lane TLS: tls.ca holds no certificate");
  }
  for (int i = 0; i < sk_X509_num(cas.get()); ++i) {
    X509_STORE_add_cert(store, sk_X509_value(cas.get(), i));
  }
  // Both ends must present a certificate the CA verifies; which node it must
  // name is checked once the lane's link is known (CheckPeerNamed).
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return absl::OkStatus();
}

// Why a handshake failed: the certificate verdict if there is one, else
// OpenSSL's error (e.g. the peer's alert).
std::string HandshakeError(SSL* ssl) {
  const long verdict = SSL_get_verify_result(ssl);
  std::string error = OpenSslError("connection closed during the handshake");
  if (verdict != X509_V_OK) {
    return absl::StrCat("certificate refused: ", X509_verify_cert_error_string(verdict));
  }
  return error;
}

// Waits for what a non-blocking SSL call asked for; false on a real error.
bool WaitForSsl(SSL* ssl, int rc, absl::Time deadline, absl::Status* status) {
  const int error = SSL_get_error(ssl, rc);
  if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) return false;
  *status = WaitFor(SSL_get_fd(ssl), error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
  return true;
}

// Runs `step` (SSL_read_ex or SSL_write_ex) until `len` bytes of `p` went
// through, waiting on the socket as OpenSSL asks, until `deadline`.
template <typename Byte, typename Step>
absl::Status Exactly(SSL* ssl, Byte* p, size_t len, absl::Time deadline, Step step,
                     const char* what, const char* closed) {
  while (len > 0) {
    size_t n = 0;
    const int rc = step(ssl, p, len, &n);
    if (rc == 1) {
      p += n;
      len -= n;
      continue;
    }
    absl::Status waited;
    if (!WaitForSsl(ssl, rc, deadline, &waited)) {
      return absl::UnavailableError(absl::StrCat(what, OpenSslError(closed)));
    }
    if (!waited.ok()) return waited;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LaneTls>> LaneTls::Create(const LaneTlsFiles& files,
                                                         KernelTls kernel, bool kernel_has_tls) {
  const bool kernel_receive = kernel == KernelTls::kAuto && kernel_has_tls;
  UniqueSslCtx client(SSL_CTX_new(TLS_client_method()));
  UniqueSslCtx server(SSL_CTX_new(TLS_server_method()));
  if (client == nullptr || server == nullptr) return Refused("SSL_CTX_new");
  for (SSL_CTX* ctx : {client.get(), server.get()}) {
    if (absl::Status s = ConfigureProtocol(ctx, kernel, kernel_receive); !s.ok()) return s;
    if (absl::Status s = ConfigureIdentity(ctx, files); !s.ok()) return s;
  }
  return std::unique_ptr<LaneTls>(new LaneTls(std::move(client), std::move(server), kernel_receive));
}

absl::StatusOr<UniqueSsl> LaneTls::NewSession(SSL_CTX* ctx, int fd) const {
  UniqueSsl ssl(SSL_new(ctx));
  if (ssl == nullptr || SSL_set_fd(ssl.get(), fd) != 1 ||
      (kernel_receive_ && !TrackSession(ssl.get()))) {
    return absl::ResourceExhaustedError(absl::StrCat("SSL_new: ", OpenSslError("out of memory")));
  }
  return ssl;
}

absl::StatusOr<UniqueSsl> LaneTls::Connect(int fd, const std::string& peer_node_id,
                                           absl::Time deadline) const {
  absl::StatusOr<UniqueSsl> session = NewSession(client_.get(), fd);
  if (!session.ok()) return session.status();
  UniqueSsl ssl = *std::move(session);
  for (;;) {
    const int rc = SSL_connect(ssl.get());
    if (rc == 1) break;
    absl::Status waited;
    if (!WaitForSsl(ssl.get(), rc, deadline, &waited)) {
      return absl::UnavailableError(absl::StrCat("TLS handshake: ", HandshakeError(ssl.get())));
    }
    if (!waited.ok()) return absl::Status(waited.code(), "TLS handshake: timed out");
  }
  if (absl::Status s = CheckPeerNamed(ssl.get(), peer_node_id); !s.ok()) return s;
  return ssl;
}

absl::StatusOr<UniqueSsl> LaneTls::NewServerSession(int fd) const {
  return NewSession(server_.get(), fd);
}

TlsStep LaneTls::Accept(SSL* ssl, std::string* error) {
  const int rc = SSL_accept(ssl);
  if (rc == 1) return TlsStep::kDone;
  switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ:
      return TlsStep::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return TlsStep::kWantWrite;
    default:
      *error = HandshakeError(ssl);
      return TlsStep::kFailed;
  }
}

absl::Status LaneTls::WriteExactly(SSL* ssl, const void* data, size_t len, absl::Time deadline) {
  return Exactly(ssl, static_cast<const char*>(data), len, deadline, SSL_write_ex, "TLS write: ",
                 "connection closed");
}

absl::Status LaneTls::ReadExactly(SSL* ssl, void* data, size_t len, absl::Time deadline) {
  return Exactly(ssl, static_cast<char*>(data), len, deadline, SSL_read_ex, "TLS read: ",
                 "connection closed by peer");
}

absl::Status LaneTls::CheckPeerNamed(SSL* ssl, const std::string& node_id) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) {
    return absl::PermissionDeniedError("the peer presented no certificate the CA verifies");
  }
  const std::vector<std::string> names = X509IdentityNames(cert);
  if (std::find(names.begin(), names.end(), node_id) != names.end()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("the data lane's certificate names [",
                                                  absl::StrJoin(names, ", "), "], not node '",
                                                  node_id, "' whose link it joins"));
}

TlsPath LaneTls::Settle(SSL* ssl, int fd, std::string* why_not) const {
  // OpenSSL decided the send side at the handshake; the receive side needs
  // the "tls" ULP that decision attached.
  const bool kernel_send = BIO_get_ktls_send(SSL_get_wbio(ssl)) != 0;
  TlsPath path = kernel_send ? TlsPath::kKernelSend : TlsPath::kUserSpace;
  if (kernel_receive_) {
    absl::Status moved =
        kernel_send ? absl::OkStatus()
                    : absl::FailedPreconditionError("OpenSSL kept the send side in user space");
    if (moved.ok()) {
      absl::StatusOr<KernelRxKey> key = PeerTrafficKey(ssl);
      moved = key.ok() ? InstallKernelReceive(fd, *key) : key.status();
    }
    if (moved.ok()) {
      path = TlsPath::kKernel;
    } else {
      *why_not = std::string(moved.message());
    }
    StopTracking(ssl, /*openssl_keeps_reading=*/path != TlsPath::kKernel);
  }
  if (path != TlsPath::kUserSpace) kernel_send_lanes_.fetch_add(1, std::memory_order_relaxed);
  if (path == TlsPath::kKernel) kernel_receive_lanes_.fetch_add(1, std::memory_order_relaxed);
  return path;
}

const char* LaneTls::PathName(TlsPath path) {
  switch (path) {
    case TlsPath::kKernel:
      return "tls (kernel send and receive)";
    case TlsPath::kKernelSend:
      return "tls (kernel send offload)";
    case TlsPath::kUserSpace:
      break;
  }
  return "tls (user space)";
}

}  // namespace xferd::transport::tcp
