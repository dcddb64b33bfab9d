// The TCP transport: one-sided write semantics over plain TCP, for hosts
// without an RDMA NIC (and for CI). The sender names (region id, offset,
// length); the receiving daemon validates each frame and receives the payload
// straight into the region, acknowledges it, and raises the region's landed
// event on a transfer's final slice.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/transport/link_set.h"
#include "daemon/transport/tcp/tcp_acceptor.h"
#include "daemon/transport/tcp/tcp_link.h"
#include "daemon/transport/tcp/tcp_socket.h"
#include "daemon/transport/tcp/tcp_tls.h"
#include "daemon/transport/tcp/tcp_worker.h"
#include "daemon/transport/transport.h"

namespace xferd::transport::tcp {

struct TcpTransportOptions {
  uint32_t pollers = 2;
  uint32_t lane_depth = 64;
  // Data listener address; port 0 picks a free port.
  std::string data_listen = "127.0.0.1:0";
  // Host advertised to peers for data lanes; empty: the listen host, or, if
  // that is a wildcard, whatever host the peer used to reach our gRPC port.
  std::string advertise_host;
  DataSocketOptions socket;
  // How long an initiator has to connect all lanes after a handshake.
  absl::Duration connect_timeout = absl::Seconds(10);
  // TLS on every lane with these certificates (transport.tcp_encryption =
  // "tls"); none: plain lanes.
  std::optional<LaneTlsFiles> tls;
  // How much of it the kernel may do (transport.tcp_kernel_tls).
  KernelTls kernel_tls = KernelTls::kAuto;
  // Tests: prepare lanes for kernel receive even where the kernel has no
  // "tls" module (they then settle in user space).
  bool assume_kernel_tls = false;
  // Whether lanes read SUMS frames and say so in the handshake. Tests set
  // false to stand in for a daemon that predates them.
  bool sums_frames = true;
};

// OK if TCP endpoints `e` name a data host of at most 255 bytes and a
// session token of at most 64; another transport's endpoints pass (the link
// names the mismatch). INVALID_ARGUMENT otherwise. Any thread; pure.
absl::Status CheckEndpoints(const LinkEndpoints& e);

class TcpTransport final : public Transport {
 public:
  // Binds the data listener. `regions` resolves inbound writes; it outlives
  // the transport. UNAVAILABLE if the listener cannot bind; INVALID_ARGUMENT
  // if OpenSSL refuses the TLS files.
  static absl::StatusOr<std::unique_ptr<TcpTransport>> Create(
      TcpTransportOptions options, const memory::RegionRegistry& regions);
  ~TcpTransport() override;

  TransportKind kind() const override { return TransportKind::kTcp; }
  std::string device() const override { return ""; }
  uint32_t lanes_per_link() const override { return options_.pollers; }
  TransportWorker& worker(uint32_t index) override { return *workers_[index]; }

  absl::StatusOr<std::shared_ptr<Link>> CreateLink(LinkEndpoints* local) override;
  absl::StatusOr<std::shared_ptr<Link>> AcceptLink(const PeerIdentity& peer,
                                                   const LinkEndpoints& remote,
                                                   LinkEndpoints* local) override;
  absl::StatusOr<RemoteRegion> GrantRegion(Link& link, const memory::Region& region,
                                           absl::Time deadline) override;
  // Nothing to withdraw: the receiver checks the ACL of every write.
  void RevokeRegion(const memory::Region&, Link*) override {}
  absl::Status CheckRemoteRegion(const RemoteRegion&, const Link&) const override {
    return absl::OkStatus();
  }
  absl::Status CheckEndpoints(const LinkEndpoints& remote) const override {
    return tcp::CheckEndpoints(remote);
  }
  TransportStats stats() const override;
  absl::StatusOr<std::unique_ptr<memory::TransportRegistration>> RegisterMemory(
      const memory::Region& region) override;
  void Shutdown() override;

  uint16_t data_port() const { return acceptor_->port(); }
  // Data connections the listener refused (see TcpAcceptor::refused).
  uint64_t refused_connections() const { return acceptor_->refused(); }
  bool encrypted() const { return tls_ != nullptr; }
  // Encrypted lanes so far whose records the kernel encrypts (kTLS TX), and
  // those whose records it also decrypts (kTLS RX).
  uint64_t kernel_tls_send_lanes() const {
    return tls_ != nullptr ? tls_->kernel_send_lanes() : 0;
  }
  uint64_t kernel_tls_receive_lanes() const {
    return tls_ != nullptr ? tls_->kernel_receive_lanes() : 0;
  }

 private:
  TcpTransport(TcpTransportOptions options, const memory::RegionRegistry& regions);
  std::shared_ptr<TcpLink> NewLink(const PeerIdentity& peer, uint32_t lanes);

  const TcpTransportOptions options_;
  const memory::RegionRegistry& regions_;
  std::unique_ptr<LaneTls> tls_;  // null: plain lanes; outlives links and acceptor
  std::vector<std::unique_ptr<TcpWorker>> workers_;
  std::unique_ptr<TcpAcceptor> acceptor_;
  std::string advertise_host_;
  LinkSet links_;  // to close them all at shutdown
};

}  // namespace xferd::transport::tcp
