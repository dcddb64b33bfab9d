// A TCP link: one data connection per lane. The initiator dials each lane
// (with TLS: handshakes, checking the responder's certificate names the peer)
// and presents the link's session token in a HELLO; the responder's acceptor
// matches the token and attaches the connection to the same lane index.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "daemon/transport/tcp/tcp_lane.h"
#include "daemon/transport/tcp/tcp_socket.h"
#include "daemon/transport/transport.h"

namespace xferd::transport::tcp {

class TcpWorker;

class TcpLink final : public Link, public std::enable_shared_from_this<TcpLink> {
 public:
  // `workers[i]` serves lane i; they outlive the link's lanes, and `tls`
  // (null: plain lanes) outlives the link. `sums_frames`: whether its lanes
  // read SUMS frames (what this end's endpoints say).
  TcpLink(PeerIdentity peer, std::vector<TcpWorker*> workers, const memory::RegionRegistry& regions,
          uint32_t lanes, uint32_t depth, DataSocketOptions socket_options, const LaneTls* tls,
          bool sums_frames);
  ~TcpLink() override;

  // Dials every lane of the responder (`remote.tcp`, whose host the engine
  // fills in when the responder advertised none).
  absl::Status Connect(const PeerIdentity& peer, const LinkEndpoints& remote,
                       absl::Time deadline) override;
  void Close(absl::Status reason) override;
  uint32_t lane_count() const override { return static_cast<uint32_t>(lanes_.size()); }
  Lane& lane(uint32_t index) override { return *lanes_[index]; }
  bool ready() const override;

  // What the lanes send the peer, from its endpoints: SUMS frames only to
  // a peer that reads them. Control thread, before any lane is attached
  // (Connect calls it; the responder's transport, before it expects them).
  void AgreeFraming(const TcpEndpoint& remote);

  // Responder side: hands an accepted, HELLO-checked connection (and its
  // TLS session, or null) to its lane.
  void AttachAccepted(uint32_t lane, UniqueFd fd, UniqueSsl ssl);

 private:
  void AttachLane(uint32_t lane, UniqueFd fd, UniqueSsl ssl);
  // Dials lane `index` at `where` and exchanges the HELLO.
  absl::Status ConnectLane(uint32_t index, const HostPort& where, const std::string& token,
                           absl::Time deadline);

  const std::vector<TcpWorker*> workers_;
  const DataSocketOptions socket_options_;
  const LaneTls* const tls_;
  const bool sums_frames_;
  std::vector<std::unique_ptr<TcpLane>> lanes_;
  std::atomic<uint32_t> lanes_handed_over_{0};
};

}  // namespace xferd::transport::tcp
