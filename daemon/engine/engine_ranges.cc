// Engine: the receiving side of StageRanges (docs/many-blocks.md): a peer's
// coming write's destination ranges, checked like a resolution and held by
// the region until the landing notice arrives. The sending side is
// SendRanges (landed_ranges.h).
#include "absl/strings/str_cat.h"
#include "daemon/engine/engine.h"

namespace xferd::engine {

// Errors: FAILED_PRECONDITION (unknown node or no landed_ranges), NOT_FOUND
// (region gone or not the one resolved), PERMISSION_DENIED (ACL), the hub's
// (RESOURCE_EXHAUSTED past its bound, INVALID_ARGUMENT for bad arrays).
absl::Status Engine::OnStageRanges(const std::string& node_id, uint64_t incarnation,
                                   const StagedRanges& ranges) {
  if (PeerFor(node_id, incarnation) == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node '", node_id, "' has no link with this daemon (restarted?): handshake first"));
  }
  std::shared_ptr<memory::Region> region = regions_.Find(ranges.region);
  if (region == nullptr || region->id() != ranges.region_id) {
    return absl::NotFoundError(absl::StrCat("node '", self_.node_id, "' has no region named '",
                                            ranges.region, "' with id ", ranges.region_id,
                                            " (deregistered?): resolve it again"));
  }
  if (!region->PeerAllowed(node_id)) {
    return absl::PermissionDeniedError(absl::StrCat("node '", node_id,
                                                    "' is not in the ACL of region '",
                                                    ranges.region, "' on '", self_.node_id, "'"));
  }
  absl::Status staged = region->landed().Stage(node_id, ranges.transfer_id, ranges.offsets,
                                               ranges.lengths, ranges.first);
  if (staged.ok()) return staged;
  return absl::Status(staged.code(), absl::StrCat("region '", ranges.region, "' on '",
                                                  self_.node_id, "': ", staged.message()));
}

}  // namespace xferd::engine
