// TLS 1.3 for the TCP transport's data lanes (transport.tcp_encryption =
// "tls"): one client and one server SSL_CTX built from the daemon's [tls]
// certificate, key and CA, peers verified against the CA both ways, and
// each lane bound to its peer's node id by the certificate's names. Where
// the kernel has TLS, OpenSSL hands it the send side at the handshake and
// the daemon the receive side after the HELLO (tcp_ktls.h); such a lane
// then uses the plain socket path. Otherwise OpenSSL does the records.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/common/openssl_util.h"

namespace xferd::transport::tcp {

// PEM texts of [tls]: this daemon's certificate chain (leaf first), its key,
// and the CA bundle of daemon certificates.
struct LaneTlsFiles {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
};

// How much of TLS the kernel may do (transport.tcp_kernel_tls).
enum class KernelTls {
  kOff,   // OpenSSL encrypts and decrypts every record
  kSend,  // OpenSSL's own send offload only (SSL_OP_ENABLE_KTLS)
  kAuto,  // that, and receive installed by the daemon where the kernel has "tls"
};

// Where a settled lane's records are encrypted and decrypted.
enum class TlsPath {
  kUserSpace,   // OpenSSL both ways
  kKernelSend,  // the kernel encrypts, OpenSSL decrypts
  kKernel,      // the kernel both ways: OpenSSL is out of the data path
};

// Outcome of one non-blocking TLS step.
enum class TlsStep { kDone, kWantRead, kWantWrite, kFailed };

class LaneTls {
 public:
  // INVALID_ARGUMENT if OpenSSL refuses the certificate, key or CA.
  // `kernel_has_tls`: KernelTlsAvailable(), which kAuto needs for receive
  // (tests set it to prepare sessions on kernels without the module).
  static absl::StatusOr<std::unique_ptr<LaneTls>> Create(const LaneTlsFiles& files,
                                                         KernelTls kernel, bool kernel_has_tls);

  // Dialer side, any thread: a TLS client session on connected socket `fd`
  // (blocking or not), handshaken by `deadline`, whose server presented a
  // certificate of the CA naming `peer_node_id`. UNAVAILABLE (handshake
  // failed, with OpenSSL's reason), PERMISSION_DENIED (wrong names),
  // DEADLINE_EXCEEDED.
  absl::StatusOr<UniqueSsl> Connect(int fd, const std::string& peer_node_id,
                                    absl::Time deadline) const;
  // Acceptor side: a server session on `fd`; drive it with Accept().
  absl::StatusOr<UniqueSsl> NewServerSession(int fd) const;
  // One non-blocking step of the server handshake. On kFailed, *error says why.
  static TlsStep Accept(SSL* ssl, std::string* error);

  // Blocking-with-deadline exchange on a handshaken session over a
  // non-blocking socket (the HELLO). UNAVAILABLE / DEADLINE_EXCEEDED.
  static absl::Status WriteExactly(SSL* ssl, const void* data, size_t len, absl::Time deadline);
  static absl::Status ReadExactly(SSL* ssl, void* data, size_t len, absl::Time deadline);

  // OK if the peer's (verified) certificate names `node_id`; else
  // PERMISSION_DENIED saying which names it has.
  static absl::Status CheckPeerNamed(SSL* ssl, const std::string& node_id);
  // Once per lane, after the HELLO and before its first frame (any thread):
  // moves the receive side into the kernel where it can, counts the lane
  // and returns its path. If a session prepared for kernel receive stays
  // with OpenSSL, `why_not` says why. After kKernel the session must not
  // read or write again.
  TlsPath Settle(SSL* ssl, int fd, std::string* why_not) const;
  // Whether sessions are prepared for kernel receive (kAuto with "tls").
  bool kernel_receive() const { return kernel_receive_; }
  // "tls (kernel send and receive)", "tls (kernel send offload)" or
  // "tls (user space)", for the log.
  static const char* PathName(TlsPath path);
  // Lanes so far whose records the kernel encrypts (kTLS TX), and those
  // whose records it also decrypts (kTLS RX).
  uint64_t kernel_send_lanes() const { return kernel_send_lanes_.load(std::memory_order_relaxed); }
  uint64_t kernel_receive_lanes() const {
    return kernel_receive_lanes_.load(std::memory_order_relaxed);
  }
  // The oldest queued OpenSSL error as text, and clears the queue; `fallback`
  // if there is none.
 private:
  LaneTls(UniqueSslCtx client, UniqueSslCtx server, bool kernel_receive)
      : client_(std::move(client)), server_(std::move(server)), kernel_receive_(kernel_receive) {}
  // A new session on `fd` of `ctx`, tracked for kernel receive if enabled.
  absl::StatusOr<UniqueSsl> NewSession(SSL_CTX* ctx, int fd) const;

  const UniqueSslCtx client_;
  const UniqueSslCtx server_;
  const bool kernel_receive_;
  mutable std::atomic<uint64_t> kernel_send_lanes_{0};
  mutable std::atomic<uint64_t> kernel_receive_lanes_{0};
};

}  // namespace xferd::transport::tcp
