// TLS 1.3 for the TCP transport's data lanes (transport.tcp_encryption =
// "tls"): one client and one server SSL_CTX built from the daemon's [tls]
// certificate, key and CA, peers verified against the CA both ways, and
// each lane bound to its peer's node id by the certificate's names. OpenSSL
// moves the records into kernel TLS (send side) where kernel and library
// offer it; otherwise they are encrypted in user space.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace xferd::transport::tcp {

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using UniqueSsl = std::unique_ptr<SSL, SslFree>;

// PEM texts of [tls]: this daemon's certificate chain (leaf first), its key,
// and the CA bundle of daemon certificates.
struct LaneTlsFiles {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
};

// Outcome of one non-blocking TLS step.
enum class TlsStep { kDone, kWantRead, kWantWrite, kFailed };

class LaneTls {
 public:
  // INVALID_ARGUMENT if OpenSSL refuses the certificate, key or CA.
  static absl::StatusOr<std::unique_ptr<LaneTls>> Create(const LaneTlsFiles& files);
  ~LaneTls();

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
  // "tls (kernel send offload)" or "tls (user space)": how records of this
  // session are sent.
  static std::string Mode(SSL* ssl);
  // Counts a handshaken lane session by how it sends (any thread).
  void CountLane(SSL* ssl) const;
  // Lanes so far whose records the kernel encrypts (kTLS TX).
  uint64_t kernel_send_lanes() const { return kernel_send_lanes_.load(std::memory_order_relaxed); }
  // The oldest queued OpenSSL error as text, and clears the queue; `fallback`
  // if there is none.
  static std::string TakeError(const char* fallback);

 private:
  LaneTls(SSL_CTX* client, SSL_CTX* server) : client_(client), server_(server) {}

  SSL_CTX* const client_;
  SSL_CTX* const server_;
  mutable std::atomic<uint64_t> kernel_send_lanes_{0};
};

}  // namespace xferd::transport::tcp
