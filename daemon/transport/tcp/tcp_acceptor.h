// The TCP transport's data listener. Accepted connections must present a
// HELLO with the session token of a link this daemon created in a handshake
// and a free lane index, within a deadline; anything else is closed. With
// TLS, the handshake comes first and the client certificate must name the
// node of the link whose token it presents. One thread, an epoll set over
// the listening socket and pending connections, all non-blocking.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/common/unique_fd.h"
#include "daemon/transport/tcp/tcp_socket.h"
#include "daemon/transport/tcp/tcp_tls.h"

namespace xferd::transport::tcp {

class TcpLink;

class TcpAcceptor {
 public:
  // `tls` (null: plain lanes) outlives the acceptor.
  static absl::StatusOr<std::unique_ptr<TcpAcceptor>> Create(const HostPort& listen,
                                                             absl::Duration hello_timeout,
                                                             const LaneTls* tls);
  ~TcpAcceptor();  // stops the thread

  uint16_t port() const { return port_; }
  // Any thread: accept up to lane_count connections presenting `token` for
  // `link`, until `deadline`.
  void Expect(const std::string& token, std::weak_ptr<TcpLink> link, uint32_t lane_count,
              absl::Time deadline);
  void Stop();

  // Connections refused (TLS handshake or certificate, bad HELLO, unknown
  // token, timeout). Any thread.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  struct Expected {
    std::weak_ptr<TcpLink> link;
    std::vector<bool> claimed;
    absl::Time deadline;
  };
  struct Pending {
    UniqueFd fd;
    UniqueSsl ssl;  // TLS: the server session, handshaken once `handshaken`
    bool handshaken = false;
    uint32_t events = 0;  // what epoll watches for
    absl::Time deadline;
    uint8_t hello[64];
    size_t have = 0;
  };

  TcpAcceptor(UniqueFd listen, UniqueFd wake, UniqueFd epoll, uint16_t port,
              absl::Duration hello_timeout, const LaneTls* tls);
  void Run();
  void AcceptAll();
  // Advances a pending connection (TLS handshake, HELLO); returns true when
  // it is finished with (attached or refused).
  bool Advance(Pending& pending);
  bool ReadHello(Pending& pending);
  // The link whose token and free lane the HELLO names, claiming the lane if
  // `claim`; null if there is none.
  std::shared_ptr<TcpLink> FindLink(const std::string& token, uint32_t lane, bool claim);
  void Watch(Pending& pending, uint32_t events);
  void Refuse(Pending& pending, absl::string_view why);
  void ExpireOld(absl::Time now);

  UniqueFd listen_;
  UniqueFd wake_;
  UniqueFd epoll_;
  const uint16_t port_;
  const absl::Duration hello_timeout_;
  const LaneTls* const tls_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0};

  Mutex mu_;
  absl::flat_hash_map<std::string, Expected> expected_ ABSL_GUARDED_BY(mu_);

  // Acceptor thread only.
  absl::flat_hash_map<int, std::unique_ptr<Pending>> pending_;
  std::thread thread_;
};

}  // namespace xferd::transport::tcp
