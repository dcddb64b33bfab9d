// PeerManager: device pairs of live links back in service (transport.h,
// "Rejoin"). The transport never calls a peer itself: the manager carries its
// offers, answers and commits over the peer service. A tick looks for broken
// pairs on every live link, so a pair comes back whichever end saw it break
// (a port event on either daemon, or a queue pair that failed), and whatever
// the transport's retry budget allows; the ticks never overlap.
#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/engine/peer_manager.h"

namespace xferd::engine {
namespace {

// How soon a pair can come back after its port does, and what the idle
// check of every link costs (a few lock round trips per link): small.
constexpr absl::Duration kRejoinPeriod = absl::Seconds(1);
constexpr absl::Duration kRejoinCallTimeout = absl::Seconds(5);

}  // namespace

void PeerManager::StartRejoins() {
  // Only links striped over several devices have pairs that can rejoin; a
  // daemon without them keeps its timer idle.
  if (transport_.stripes_devices()) ScheduleRejoins();
}

void PeerManager::ScheduleRejoins() {
  // The timer thread only queues the work: offers create queue pairs and
  // call the peer, which must not hold up deadlines.
  timer_.RunAt(absl::Now() + kRejoinPeriod, [this] {
    executor_.Run([this] {
      if (life_.draining()) return;  // stops the ticks
      RejoinBrokenPairs();
      ScheduleRejoins();
    });
  });
}

void PeerManager::RejoinBrokenPairs() {
  for (const std::shared_ptr<Peer>& peer : peers_.List()) {
    transport::LinkRejoin* rejoin = peer->link()->rejoin();
    transport::LinkEndpoints offer;
    if (rejoin == nullptr || peer->link()->broken() || !rejoin->OfferRejoin(&offer)) continue;
    const std::string& address = peer->node().address;
    absl::StatusOr<transport::LinkEndpoints> answer =
        rpc_.RejoinDevices(address, life_.self(), offer, absl::Now() + kRejoinCallTimeout);
    // No device in the answer: the peer took no pair (nothing of its own to check).
    if (answer.ok() && !answer->devices.empty()) {
      if (absl::Status s = transport_.CheckEndpoints(*answer); !s.ok()) answer = s;
    }
    if (!answer.ok()) {
      spdlog::info("peer {}: rejoining {} device pairs failed: {}", peer->node_id(),
                   offer.devices.size(), answer.status());
      answer = transport::LinkEndpoints{offer.kind};  // drops the offer
    }
    const std::vector<uint32_t> joined = rejoin->ConnectRejoin(*answer);
    if (joined.empty()) continue;
    // Our side is in service; the peer's carries nothing until it hears so.
    // If this fails, its side of the pair stays broken and it offers the
    // pair itself later.
    absl::Status s =
        rpc_.CommitRejoin(address, life_.self(), joined, absl::Now() + kRejoinCallTimeout);
    if (!s.ok()) spdlog::warn("peer {}: committing a rejoin failed: {}", peer->node_id(), s);
    // The peer's keys for our lanes on the rejoined pairs were bound to the
    // queue pairs they replace (RemoteRegion::key_qpns): resolving again,
    // now that both ends are in service, gets keys for the fresh ones.
    peer->ForgetRegions();
  }
}

absl::StatusOr<PeerManager::Rejoinable> PeerManager::RejoinableLink(const std::string& node_id,
                                                                     uint64_t incarnation) const {
  std::shared_ptr<Peer> peer = PeerFor(node_id, incarnation);
  if (peer == nullptr || peer->link()->broken()) {
    return absl::FailedPreconditionError(
        absl::StrCat("node '", node_id, "' has no live link with this daemon: handshake again"));
  }
  transport::LinkRejoin* rejoin = peer->link()->rejoin();
  if (rejoin == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the link with node '", node_id, "' has no device pairs to rejoin (one device or TCP)"));
  }
  return Rejoinable{std::move(peer), rejoin};
}

absl::StatusOr<transport::LinkEndpoints> PeerManager::AcceptRejoin(
    const std::string& node_id, uint64_t incarnation, const transport::LinkEndpoints& offer) {
  if (life_.draining()) return absl::UnavailableError("daemon is shutting down");
  RETURN_IF_ERROR(transport_.CheckEndpoints(offer));
  ASSIGN_OR_RETURN(Rejoinable link, RejoinableLink(node_id, incarnation));
  transport::LinkEndpoints answer;
  // Both ends offering the same pair at once: the first node id's stands.
  RETURN_IF_ERROR(
      link.rejoin->AcceptRejoin(offer, /*keep_own=*/life_.self().node_id < node_id, &answer));
  return answer;
}

absl::Status PeerManager::OnCommitRejoin(const std::string& node_id, uint64_t incarnation,
                                         const std::vector<uint32_t>& devices) {
  ASSIGN_OR_RETURN(Rejoinable link, RejoinableLink(node_id, incarnation));
  link.rejoin->CommitRejoin(devices);
  link.peer->ForgetRegions();  // as RejoinBrokenPairs does
  return absl::OkStatus();
}

}  // namespace xferd::engine
