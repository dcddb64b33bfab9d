// TransferPlanner: layouts, local checks and the plan of a request.
#include "daemon/engine/transfer_planner.h"

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/engine/block_plan.h"

namespace xferd::engine {
namespace {

constexpr uint64_t kMinSlice = 4096;
// Planning a request of this many blocks or more logs its cost at info.
constexpr uint64_t kLogPlanBlocks = 65536;

// The spec a transfer keeps: everything but the block arrays, which
// planning turned into the transfer's blocks (history must stay small).
TransferSpec Summarize(const TransferSpec& w) {
  TransferSpec s;
  s.direction = w.direction;
  s.src_region = w.src_region;
  s.src_offset = w.src_offset;
  s.peer = w.peer;
  s.dst_region = w.dst_region;
  s.dst_offset = w.dst_offset;
  s.length = w.length;
  s.slice_size = w.slice_size;
  s.verify = w.verify;
  s.timeout = w.timeout;
  s.label = w.label;
  s.priority = w.priority;
  s.tenant = w.tenant;
  s.blocks.form = w.blocks.form;
  s.blocks.src_layout = w.blocks.src_layout;
  s.blocks.dst_layout = w.blocks.dst_layout;
  s.request_blocks = w.request_blocks;
  s.user_data = w.user_data;
  s.detached = w.detached;
  return s;
}

// The first block of a local layout outside its region, as an error.
absl::Status CheckLayoutInRegion(const Layout& l, uint64_t size) {
  if (l.extent() <= size) return absl::OkStatus();
  for (uint64_t k = 0; k < l.blocks(); ++k) {
    const unsigned __int128 wide =
        l.offsets.empty() ? static_cast<unsigned __int128>(k) * l.stride + l.start : l.offsets[k];
    const uint64_t offset = wide > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(wide);
    if (offset > size || l.block_length > size - offset) {
      return absl::OutOfRangeError(
          absl::StrCat("layout '", l.name, "' block #", k, ": range [", offset, ", ", offset, "+",
                       l.block_length, ") exceeds region '", l.region, "' of ", size, " bytes"));
    }
  }
  return absl::OutOfRangeError(
      absl::StrCat("layout '", l.name, "' exceeds region '", l.region, "' of ", size, " bytes"));
}

// Fills `region` from the layout, or checks that the request names the same.
absl::Status BindRegion(std::string* region, const Layout& layout, const char* field) {
  if (region->empty()) {
    *region = layout.region;
  } else if (*region != layout.region) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " '", *region, "' but layout '", layout.name, "' is of region '",
                     layout.region, "': leave ", field, " empty or make them agree"));
  }
  return absl::OkStatus();
}

}  // namespace

TransferPlanner::TransferPlanner(const EngineConfig& config, transport::TransportKind kind,
                                 const memory::RegionRegistry& regions, const PeerManager& peers)
    : config_(config), kind_(kind), regions_(regions), peers_(peers) {}

absl::StatusOr<std::shared_ptr<const Layout>> TransferPlanner::PrepareLayout(Layout layout,
                                                                             const Tenant& tenant) {
  layout.owner = tenant.name();
  if (absl::Status s = CheckLayoutShape(layout); !s.ok()) return s;
  if (layout.peer.empty()) {
    std::shared_ptr<memory::Region> region = regions_.Find(layout.region);
    if (region == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("region '", layout.region, "' is not registered on this daemon"));
    }
    if (absl::Status s = tenant.CheckUse(*region); !s.ok()) return s;
    if (absl::Status s = CheckLayoutInRegion(layout, region->size()); !s.ok()) return s;
  } else {
    std::shared_ptr<Peer> peer = peers_.Find(layout.peer);
    if (peer == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("no peer '", layout.peer, "' (by node id or address): connect it first"));
    }
    layout.peer = peer->node_id();
  }
  auto shared = std::make_shared<const Layout>(std::move(layout));
  if (absl::Status s = layouts_.Add(shared); !s.ok()) return s;
  spdlog::info("layout prepared name={} peer={} region={} blocks={} block_length={}", shared->name,
               shared->peer, shared->region, shared->blocks(), shared->block_length);
  return shared;
}

absl::Status TransferPlanner::BindLayouts(TransferSpec& w) const {
  BlockSpec& b = w.blocks;
  if (b.form != BlockSpec::Form::kLayout) return absl::OkStatus();
  b.src_layout_ref = layouts_.Find(b.src_layout);
  b.dst_layout_ref = layouts_.Find(b.dst_layout);
  for (const auto& [name, ref] :
       {std::pair{&b.src_layout, &b.src_layout_ref}, std::pair{&b.dst_layout, &b.dst_layout_ref}}) {
    if (*ref == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("no layout named '", *name, "': prepare it with PrepareLayout"));
    }
    if (w.tenant != nullptr && !w.tenant->Owns((*ref)->owner)) {
      return w.tenant->Denied(absl::StrCat("layout '", *name, "' belongs to tenant '",
                                           (*ref)->owner, "', not to tenant '", w.tenant->name(),
                                           "'"));
    }
  }
  // The peer's side must be a layout of that peer, the local side a local one.
  const Layout& local = IsRead(w) ? *b.dst_layout_ref : *b.src_layout_ref;
  const Layout& remote = IsRead(w) ? *b.src_layout_ref : *b.dst_layout_ref;
  if (!local.peer.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout '", local.name, "' is of peer '", local.peer,
                     "' but names the local side of this ", IsRead(w) ? "read" : "write"));
  }
  std::shared_ptr<Peer> peer = peers_.Find(w.peer);
  if (remote.peer.empty() || peer == nullptr || peer->node_id() != remote.peer) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout '", remote.name, "' is ",
                     remote.peer.empty() ? "local" : "of peer '" + remote.peer + "'",
                     " but names the side on peer '", w.peer, "': prepare it with that peer"));
  }
  if (absl::Status s = BindRegion(&w.src_region, *b.src_layout_ref, "src_region"); !s.ok()) {
    return s;
  }
  return BindRegion(&w.dst_region, *b.dst_layout_ref, "dst_region");
}

absl::Status TransferPlanner::CheckLocal(TransferSpec& spec) const {
  if (spec.label.size() > kMaxLabelBytes) {
    return absl::InvalidArgumentError(absl::StrCat("label is ", spec.label.size(),
                                                   " bytes; at most ", kMaxLabelBytes,
                                                   " bytes are kept: shorten it"));
  }
  RETURN_IF_ERROR(BindLayouts(spec));
  return CheckLocalRange(spec);
}

absl::Status TransferPlanner::CheckLocalRange(const TransferSpec& w) const {
  const char* role = IsRead(w) ? "destination" : "source";
  std::shared_ptr<memory::Region> local = regions_.Find(LocalRegion(w));
  if (local == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(role, " region '", LocalRegion(w), "' is not registered on this daemon"));
  }
  if (w.tenant != nullptr) RETURN_IF_ERROR(w.tenant->CheckUse(*local));
  if (local->lost()) return local->LostStatus();  // until it is deregistered
  if (w.blocks.form != BlockSpec::Form::kRange) {
    if (w.src_offset != 0 || w.dst_offset != 0 || w.length != 0) {
      return absl::InvalidArgumentError(
          "src_offset, dst_offset and length must be 0 with blocks (the blocks say it all)");
    }
    return w.blocks.CheckShape();  // each block is checked when planned
  }
  if (w.length == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("length is 0: nothing to ", IsRead(w) ? "read" : "write"));
  }
  return local->CheckRange(IsRead(w) ? w.dst_offset : w.src_offset, w.length, role);
}

absl::StatusOr<Transfer::Plan> TransferPlanner::Plan(const TransferSpec& w, RemoteKeySnapshot& keys,
                                            bool* stale) const {
  RETURN_IF_ERROR(CheckLocalRange(w));
  Transfer::Plan plan;
  plan.spec = Summarize(w);
  plan.completion = w.completion;
  plan.poller = w.poller;
  plan.kind = w.direction;
  plan.local = regions_.Find(LocalRegion(w));
  plan.peer = peers_.Find(w.peer);
  if (plan.peer == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "no peer '", w.peer, "' (by node id or address): connect it first with ConnectPeer"));
  }
  plan.link = plan.peer->link();
  if (plan.link->broken()) {
    *stale = true;
    return absl::UnavailableError(absl::StrCat("peer '", plan.peer->node_id(),
                                               "' is disconnected (", plan.link->status().message(),
                                               "): connect it again with ConnectPeer"));
  }
  ASSIGN_OR_RETURN(plan.remote_key, CheckRemote(w, *plan.peer, keys, stale));
  plan.remote = plan.remote_key->region.key;
  plan.stage_ranges =
      !IsRead(w) && plan.remote_key->region.landed_ranges && w.blocks.count() > 1;
  const uint64_t slice = w.slice_size == 0 ? config_.slice_size : w.slice_size;
  if (slice < kMinSlice || slice > transport::kMaxSliceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice_size ", w.slice_size, " is outside 4KiB..16MiB"));
  }
  if (w.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive (leave it unset for none)");
  }
  plan.slice_size = static_cast<uint32_t>(slice);
  plan.spec.verify = w.verify.value_or(config_.verify) || w.expected_checksums != nullptr;
  if (*plan.spec.verify) RETURN_IF_ERROR(CheckVerify(w));
  if (w.blocks.form == BlockSpec::Form::kRange) {
    const uint64_t local = IsRead(w) ? w.dst_offset : w.src_offset;
    const uint64_t remote_offset = IsRead(w) ? w.src_offset : w.dst_offset;
    RETURN_IF_ERROR(
        AppendSplit(local, remote_offset, w.length, plan.slice_size, &plan.blocks, "the range"));
  } else {
    RETURN_IF_ERROR(PlanMany(w, *plan.peer, plan.remote.size, &plan));
  }
  if (w.expected_checksums != nullptr && w.expected_checksums->size() != plan.blocks.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected_checksums holds ", w.expected_checksums->size(), " checksums and the read has ",
        plan.blocks.size(),
        " blocks: pass one per block, as the verified write returned them (a block longer than "
        "slice_size has one per slice: use the write's slice_size)"));
  }
  plan.expected_checksums = w.expected_checksums;
  // TCP checks in its frames, the self link as it copies; verbs at the peer.
  plan.verify_at_peer =
      *plan.spec.verify && kind_ == transport::TransportKind::kVerbs && !plan.peer->is_self();
  plan.lanes = plan.link->lane_count();
  plan.transport = kind_;
  return plan;
}

// What verifying a transfer asks for is there.
absl::Status TransferPlanner::CheckVerify(const TransferSpec& w) const {
  if (w.expected_checksums != nullptr && !IsRead(w)) {
    return absl::InvalidArgumentError(
        "expected_checksums is for reads (a restore checked against checksums stored when the "
        "data was written); a write's source is checksummed as it is sent");
  }
  if (w.expected_checksums != nullptr && w.verify == false) {
    return absl::InvalidArgumentError(
        "expected_checksums needs verify: leave verify unset or set it to true");
  }
  return absl::OkStatus();
}

// The peer's region as resolved (this daemon's own, looked up now), with
// its access checked.
absl::StatusOr<std::shared_ptr<const CachedKey>> TransferPlanner::CheckRemote(
    const TransferSpec& w, const Peer& peer, RemoteKeySnapshot& keys, bool* stale) const {
  const std::string& name = RemoteRegionName(w);
  if (peer.is_self()) {
    // This daemon's own region: looked up now, as the local side is.
    ASSIGN_OR_RETURN(std::shared_ptr<const CachedKey> own,
                     peers_.ResolveOwn(name, IsRead(w) ? "source" : "destination"));
    RETURN_IF_ERROR(CheckRemoteAccess(w, peer, *own));
    return own;
  }
  std::shared_ptr<const CachedKey> cached = keys.Find(peer, name);
  if (cached == nullptr) {
    *stale = true;
    return absl::UnavailableError(absl::StrCat("region '", name, "' on peer '", peer.node_id(),
                                               "' was invalidated while this was submitted"));
  }
  RETURN_IF_ERROR(CheckRemoteAccess(w, peer, *cached));
  return cached;
}

// The peer's region allows this direction and (for a range) contains it.
// Blocks are checked one by one when planned.
absl::Status TransferPlanner::CheckRemoteAccess(const TransferSpec& w, const Peer& peer,
                                                const CachedKey& key) const {
  const std::string& name = RemoteRegionName(w);
  const ResolvedRegion* remote = &key.region;
  if (IsRead(w) && !remote->access.remote_read) {
    return absl::PermissionDeniedError(
        absl::StrCat("region '", name, "' on peer '", peer.node_id(),
                     "' does not allow remote reads: register it there with remote_read"));
  }
  if (!IsRead(w) && !remote->access.remote_write) {
    return absl::PermissionDeniedError(absl::StrCat("region '", name, "' on peer '", peer.node_id(),
                                                    "' does not allow remote writes"));
  }
  const uint64_t offset = IsRead(w) ? w.src_offset : w.dst_offset;
  const uint64_t size = remote->key.size;
  if (w.blocks.form == BlockSpec::Form::kRange && (offset > size || w.length > size - offset)) {
    return absl::OutOfRangeError(absl::StrCat(
        IsRead(w) ? "source" : "destination", " range [", offset, ", ", offset, "+", w.length,
        ") exceeds region '", name, "' on peer '", peer.node_id(), "' of ", size, " bytes"));
  }
  return absl::OkStatus();
}

// Expands and checks a many-block request into plan->blocks, and records
// its block count and bytes in the spec the transfer keeps.
absl::Status TransferPlanner::PlanMany(const TransferSpec& w, const Peer& peer, uint64_t remote_size,
                              Transfer::Plan* plan) const {
  const absl::Time start = absl::Now();
  const RegionSide local{LocalRegion(w), "", plan->local->size()};
  const RegionSide remote{RemoteRegionName(w), peer.node_id(), remote_size};
  ASSIGN_OR_RETURN(plan->blocks,
                   PlanBlocks(w.blocks, IsRead(w) ? remote : local, IsRead(w) ? local : remote,
                              !IsRead(w), plan->slice_size, /*merge=*/!*plan->spec.verify));
  uint64_t bytes = 0;
  for (const transport::Block& b : plan->blocks) bytes += b.length;
  plan->spec.length = bytes;
  plan->spec.request_blocks = w.blocks.count();
  const absl::Duration took = absl::Now() - start;
  const double ns_per_block = absl::ToDoubleNanoseconds(took) / w.blocks.count();
  if (w.blocks.count() >= kLogPlanBlocks) {
    spdlog::info("planned {} blocks ({} after merging) bytes={} in {} ({:.1f} ns/block)",
                 w.blocks.count(), plan->blocks.size(), bytes, absl::FormatDuration(took),
                 ns_per_block);
  }
  return absl::OkStatus();
}

}  // namespace xferd::engine
