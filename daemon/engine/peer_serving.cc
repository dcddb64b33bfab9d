// PeerManager: what peers ask of this daemon — keys to a local region over
// the link they name, a coming write's ranges (docs/many-blocks.md; the
// sending side is SendRanges in landed_ranges.h), the checksums of a
// verified transfer's blocks (docs/integrity.md; peer_verify.h), and their
// notices that a region of theirs went away or that they are leaving.
#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/engine/peer_manager.h"
#include "daemon/engine/peer_verify.h"

namespace xferd::engine {
namespace {

// How long a resolution waits for the link it names to be installed: the
// callee initiated that handshake and is still finishing it.
constexpr absl::Duration kLinkInstallWait = absl::Seconds(5);

// PERMISSION_DENIED unless the region's ACL admits the node.
absl::Status CheckAllowed(const memory::Region& region, const std::string& self,
                          const std::string& node_id, const std::string& name) {
  if (region.PeerAllowed(node_id)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("node '", node_id, "' is not in the ACL of region '", name, "' on '", self, "'"));
}

// NOT_FOUND unless `region` is still `name` in `regions`; then CheckAllowed.
absl::Status CheckResolvable(const memory::RegionRegistry& regions, const std::string& self,
                             const std::string& node_id, const std::string& name,
                             const memory::Region* region) {
  if (region == nullptr || regions.Find(name).get() != region) {
    return absl::NotFoundError(absl::StrCat("node '", self, "' has no region named '", name, "'"));
  }
  RETURN_IF_ERROR(CheckAllowed(*region, self, node_id, name));
  return region->LostStatus();  // a region that lost its memory, until deregistered
}

}  // namespace

absl::StatusOr<std::shared_ptr<Peer>> PeerManager::PeerForLink(const std::string& node_id,
                                                               uint64_t incarnation,
                                                               uint64_t link_id,
                                                               absl::Time deadline) {
  std::shared_ptr<Peer> peer;
  auto found = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    peer = PeerFor(node_id, incarnation);
    // A link this daemon is still connecting (it initiated the handshake,
    // the peer already installed its side) is installed soon: wait for it.
    const bool matches = peer != nullptr && (link_id == 0 || peer->link_id() == link_id);
    return matches || connecting_.empty();
  };
  {
    MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(found, std::min(deadline, absl::Now() + kLinkInstallWait));
  }
  if (peer == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node '", node_id, "' has no link with this daemon (restarted?): handshake first"));
  }
  if (link_id != 0 && peer->link_id() != link_id) {
    return absl::UnavailableError(absl::StrCat(
        "the link node '", node_id, "' asks keys for is not this daemon's current link with it ("
        "replaced by a reconnection): retry"));
  }
  return peer;
}

absl::StatusOr<ResolvedRegion> PeerManager::ResolveForPeer(const std::string& node_id,
                                                           uint64_t incarnation, uint64_t link_id,
                                                           const std::string& name,
                                                           absl::Time deadline) {
  ASSIGN_OR_RETURN(std::shared_ptr<Peer> peer,
                   PeerForLink(node_id, incarnation, link_id, deadline));
  std::shared_ptr<memory::Region> region = regions_.Find(name);
  const auto resolvable = [&] {
    return CheckResolvable(regions_, life_.self().node_id, node_id, name, region.get());
  };
  RETURN_IF_ERROR(resolvable());
  {
    MutexLock lock(&mu_);
    resolved_by_[region->id()].insert(node_id);
  }
  ASSIGN_OR_RETURN(transport::RemoteRegion key,
                   transport_.GrantRegion(*peer->link(), *region, deadline));
  // A deregistration or an ACL change while the keys were being bound
  // revoked what was granted then (resolved_by_ named this node already):
  // these too.
  if (absl::Status s = resolvable(); !s.ok()) {
    transport_.RevokeRegion(*region, peer->link().get());
    return s;
  }
  return ResolvedRegion{std::move(key), region->access(), region->spec().landed_ranges};
}

absl::StatusOr<std::shared_ptr<const CachedKey>> PeerManager::ResolveOwn(
    const std::string& name, absl::string_view role) const {
  const std::string& self = life_.self().node_id;
  std::shared_ptr<memory::Region> region = regions_.Find(name);
  if (absl::Status s = CheckResolvable(regions_, self, self, name, region.get()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(role, " region '", name, "' on peer '", self,
                                               "' (this daemon): ", s.message()));
  }
  transport::RemoteRegion key;
  key.region_id = region->id();
  key.size = region->size();  // the copy uses the region itself (own_region)
  return std::make_shared<const CachedKey>(
      ResolvedRegion{std::move(key), region->access(), region->spec().landed_ranges},
      std::move(region));
}

absl::Status PeerManager::OnRegionInvalidated(const std::string& node_id, uint64_t incarnation,
                                              uint32_t region_id, const std::string& region) {
  if (std::shared_ptr<Peer> peer = PeerFor(node_id, incarnation)) {
    peer->ForgetRegion(region);
    peer->ForgetRegionId(region_id);
  }
  return absl::OkStatus();
}

absl::Status PeerManager::OnGoodbye(const std::string& node_id, uint64_t incarnation,
                                    const std::string& reason) {
  if (std::shared_ptr<Peer> peer = PeerFor(node_id, incarnation)) {
    spdlog::info("peer {} says goodbye: {}", node_id, reason);
    peer->link()->Close(
        absl::UnavailableError(absl::StrCat("peer '", node_id, "' went away: ", reason)));
  }
  return absl::OkStatus();
}

// Errors: FAILED_PRECONDITION (unknown node), NOT_FOUND (region gone or not
// the one resolved), PERMISSION_DENIED (ACL).
absl::StatusOr<std::shared_ptr<memory::Region>> PeerManager::RegionAsResolved(
    const std::string& node_id, uint64_t incarnation, uint32_t region_id,
    const std::string& name) const {
  const std::string& self = life_.self().node_id;
  if (PeerFor(node_id, incarnation) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node '", node_id, "' has no link with this daemon (restarted?): handshake first"));
  }
  std::shared_ptr<memory::Region> region = regions_.Find(name);
  if (region == nullptr || region->id() != region_id) {
    return absl::NotFoundError(absl::StrCat("node '", self, "' has no region named '", name,
                                            "' with id ", region_id,
                                            " (deregistered?): resolve it again"));
  }
  RETURN_IF_ERROR(CheckAllowed(*region, self, node_id, name));
  return region;
}

// Errors: RegionAsResolved's, FAILED_PRECONDITION (no landed_ranges), the
// hub's (RESOURCE_EXHAUSTED past its bound, INVALID_ARGUMENT for bad arrays).
absl::Status PeerManager::OnStageRanges(const std::string& node_id, uint64_t incarnation,
                                        const StagedRanges& ranges) {
  ASSIGN_OR_RETURN(std::shared_ptr<memory::Region> region,
                   RegionAsResolved(node_id, incarnation, ranges.region_id, ranges.region));
  absl::Status staged = region->landed().Stage(node_id, ranges.transfer_id, ranges.offsets,
                                               ranges.lengths, ranges.first);
  if (staged.ok()) return staged;
  return absl::Status(staged.code(), absl::StrCat("region '", ranges.region, "' on '",
                                                  life_.self().node_id, "': ", staged.message()));
}

absl::StatusOr<std::string> PeerManager::OnChecksumBlocks(const std::string& node_id,
                                                          uint64_t incarnation,
                                                          const ChecksumQuery& query) {
  ASSIGN_OR_RETURN(std::shared_ptr<memory::Region> region,
                   RegionAsResolved(node_id, incarnation, query.region_id, query.region));
  RETURN_IF_ERROR(region->LostStatus());
  return ChecksumForPeer(region, query, node_id);
}

}  // namespace xferd::engine
