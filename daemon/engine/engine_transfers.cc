// Engine: transfers — validation (all or nothing), resolution of destination
// regions, admission, launch on the pollers, cancel and listing.
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"
#include "daemon/common/log.h"
#include "daemon/engine/block_plan.h"
#include "daemon/engine/engine.h"
#include "daemon/engine/landed_ranges.h"

namespace xferd::engine {
namespace {

// Writes in one batch: validation is all-or-nothing, so a batch is bounded.
constexpr size_t kMaxBatch = 4096;
constexpr uint64_t kMinSlice = 4096;
// Bound on resolving a batch's destination regions with their peers.
constexpr absl::Duration kResolveTimeout = absl::Seconds(10);

absl::Status ForWrite(const absl::Status& status, size_t index, size_t count) {
  if (status.ok() || count == 1) return status;
  return absl::Status(status.code(), absl::StrCat("write #", index, ": ", status.message()));
}

// Planning a request of this many blocks or more logs its cost at info.
constexpr uint64_t kLogPlanBlocks = 65536;

// The spec a transfer keeps: everything but the block arrays, which
// planning turned into the transfer's blocks (history must stay small).
WriteSpec Summarize(const WriteSpec& w) {
  WriteSpec s;
  s.direction = w.direction;
  s.src_region = w.src_region;
  s.src_offset = w.src_offset;
  s.peer = w.peer;
  s.dst_region = w.dst_region;
  s.dst_offset = w.dst_offset;
  s.length = w.length;
  s.slice_size = w.slice_size;
  s.timeout = w.timeout;
  s.label = w.label;
  s.blocks.form = w.blocks.form;
  s.blocks.src_layout = w.blocks.src_layout;
  s.blocks.dst_layout = w.blocks.dst_layout;
  s.request_blocks = w.request_blocks;
  return s;
}

}  // namespace

void Engine::Submit(std::vector<WriteSpec> writes, bool batch,
                    Callback<std::vector<std::shared_ptr<Transfer>>> reply) {
  // Timeouts run from here: time spent reconnecting or resolving counts.
  const absl::Time submitted_at = absl::Now();
  // Every refusal, whichever path reports it, is counted once.
  auto done = [this, reply = std::move(reply)](
                  absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> result) {
    if (!result.ok()) table_.CountRefused(result.status());
    reply(std::move(result));
  };
  if (draining()) {
    done(absl::UnavailableError("daemon is shutting down: no new transfers"));
    return;
  }
  if (writes.empty()) {
    done(absl::InvalidArgumentError("no writes given"));
    return;
  }
  if (writes.size() > kMaxBatch) {
    done(absl::InvalidArgumentError(
        absl::StrCat("batch of ", writes.size(), " writes; at most ", kMaxBatch, " per batch")));
    return;
  }
  // What can be checked here is checked first: a bad local side is reported
  // as such, without waiting on (or blaming) the peer.
  for (size_t i = 0; i < writes.size(); ++i) {
    absl::Status local = BindLayouts(writes[i]);
    if (local.ok()) local = CheckLocal(writes[i]);
    if (local.ok() && peers_.Find(writes[i].peer) == nullptr &&
        node_directory_.load(std::memory_order_acquire) == nullptr) {
      local = absl::NotFoundError(absl::StrCat("no peer '", writes[i].peer,
                                               "' (by node id or address): connect it first "
                                               "with ConnectPeer"));
    }
    if (!local.ok()) {
      done(ForWrite(local, i, writes.size()));
      return;
    }
  }
  if (Ready(writes)) {  // the common case: validate and queue right here
    bool stale = false;
    absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> admitted =
        Admit(writes, batch, submitted_at, &stale);
    if (!stale) {
      done(std::move(admitted));
      return;
    }
  }
  executor_.Run(
      [this, writes = std::move(writes), batch, submitted_at, done = std::move(done)]() mutable {
        done(ResolveAndAdmit(writes, batch, submitted_at));
      });
}

bool Engine::Ready(const std::vector<WriteSpec>& writes) const {
  for (const WriteSpec& w : writes) {
    std::shared_ptr<Peer> peer = peers_.Find(w.peer);
    if (peer == nullptr || peer->link()->broken() || !peer->CachedRegion(RemoteRegionName(w))) {
      return false;
    }
  }
  return true;
}

// On the control executor. A peer's link may break, or a remote region's key
// be invalidated, between resolution and admission (a region deregistered on
// the peer just then): that is this daemon's race, not the client's, so the
// requests are resolved again until their deadline, and the answer is the
// peer's real one (e.g. NOT_FOUND once the region is gone).
absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> Engine::ResolveAndAdmit(
    const std::vector<WriteSpec>& writes, bool batch, absl::Time submitted_at) {
  // No write may wait on its peer past its own deadline (a partition).
  absl::Duration budget = kResolveTimeout;
  for (const WriteSpec& w : writes) budget = std::min(budget, w.timeout);
  const absl::Time deadline = submitted_at + budget;
  RETURN_IF_ERROR(ConnectUnknown(writes, deadline));
  while (true) {
    RETURN_IF_ERROR(ReconnectBroken(writes, deadline));
    RETURN_IF_ERROR(ResolveMissing(writes, deadline));
    bool stale = false;
    absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> admitted =
        Admit(writes, batch, submitted_at, &stale);
    if (!stale) return admitted;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(admitted.status().message(), ", again and again until the deadline (",
                       absl::FormatDuration(budget), "): retry later"));
    }
  }
}

// A peer whose link broke (a fault, a restart) is connected again by a new
// handshake before writing to it; its old region keys went with the old link.
absl::Status Engine::ReconnectBroken(const std::vector<WriteSpec>& writes, absl::Time deadline) {
  for (size_t i = 0; i < writes.size(); ++i) {
    std::shared_ptr<Peer> peer = peers_.Find(writes[i].peer);
    if (peer == nullptr || !peer->link()->broken()) continue;
    const absl::Status why = peer->link()->status();
    // A restarted peer may serve at another address: the directory knows it.
    std::string address = peer->node().address;
    if (NodeDirectory* directory = node_directory_.load(std::memory_order_acquire)) {
      absl::StatusOr<std::string> now = directory->AddressOf(peer->node_id(), deadline);
      if (now.ok()) address = *now;
    }
    absl::StatusOr<PeerInfo> again = ConnectNow(address, deadline);
    if (!again.ok()) {
      return ForWrite(absl::UnavailableError(absl::StrCat(
                          "peer '", peer->node_id(), "' is disconnected (", why.message(),
                          ") and connecting it again failed: ", again.status().message())),
                      i, writes.size());
    }
    spdlog::info("peer {} reconnected after: {}", peer->node_id(), why.message());
  }
  return absl::OkStatus();
}

// A write to a node never connected: its address comes from the node
// directory, and the handshake runs within the write's deadline.
absl::Status Engine::ConnectUnknown(const std::vector<WriteSpec>& writes, absl::Time deadline) {
  NodeDirectory* directory = node_directory_.load(std::memory_order_acquire);
  if (directory == nullptr) return absl::OkStatus();
  for (size_t i = 0; i < writes.size(); ++i) {
    const std::string& node = writes[i].peer;
    if (peers_.Find(node) != nullptr) continue;
    absl::StatusOr<std::string> address = directory->AddressOf(node, deadline);
    if (!address.ok()) {
      const absl::Status why = absl::IsNotFound(address.status())
                                   ? absl::NotFoundError(absl::StrCat(
                                         "no peer '", node, "' (by node id or address), and ",
                                         address.status().message()))
                                   : address.status();
      return ForWrite(why, i, writes.size());
    }
    absl::StatusOr<PeerInfo> peer = ConnectNodeAt(node, *address, deadline);
    if (!peer.ok()) return ForWrite(peer.status(), i, writes.size());
  }
  return absl::OkStatus();
}

absl::Status Engine::CheckLocal(const WriteSpec& w) const {
  const char* role = IsRead(w) ? "destination" : "source";
  std::shared_ptr<memory::Region> local = regions_.Find(LocalRegion(w));
  if (local == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(role, " region '", LocalRegion(w), "' is not registered on this daemon"));
  }
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

absl::Status Engine::ResolveMissing(const std::vector<WriteSpec>& writes, absl::Time deadline) {
  absl::flat_hash_set<std::pair<std::string, std::string>> asked;
  for (size_t i = 0; i < writes.size(); ++i) {
    const WriteSpec& w = writes[i];
    std::shared_ptr<Peer> peer = peers_.Find(w.peer);
    const std::string& name = RemoteRegionName(w);
    if (peer == nullptr || peer->link()->broken() || peer->CachedRegion(name)) continue;
    if (!asked.insert({peer->node_id(), name}).second) continue;
    absl::StatusOr<ResolvedRegion> region =
        rpc_.ResolveRegion(peer->node().address, self_, peer->peer_link_id(), name, deadline);
    if (!region.ok()) {
      return ForWrite(absl::Status(region.status().code(),
                                   absl::StrCat(IsRead(w) ? "source" : "destination", " region '",
                                                name, "' on peer '", peer->node_id(),
                                                "': ", region.status().message())),
                      i, writes.size());
    }
    if (absl::Status s = transport_.CheckRemoteRegion(region->key, *peer->link()); !s.ok()) {
      return ForWrite(
          absl::Status(s.code(), absl::StrCat("peer '", peer->node_id(), "': ", s.message())), i,
          writes.size());
    }
    peer->CacheRegion(name, *region);
  }
  return absl::OkStatus();
}

absl::StatusOr<Transfer::Plan> Engine::Plan(const WriteSpec& w, RemoteKeySnapshot& keys,
                                            bool* stale) const {
  RETURN_IF_ERROR(CheckLocal(w));
  Transfer::Plan plan;
  plan.spec = Summarize(w);
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
  ASSIGN_OR_RETURN(ResolvedRegion remote, CheckRemote(w, *plan.peer, keys, stale));
  plan.remote = remote.key;
  plan.stage_ranges = !IsRead(w) && remote.landed_ranges && w.blocks.count() > 1;
  const uint64_t slice = w.slice_size == 0 ? config_.slice_size : w.slice_size;
  if (slice < kMinSlice || slice > transport::kMaxSliceBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("slice_size ", w.slice_size, " is outside 4KiB..16MiB"));
  }
  if (w.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("timeout must be positive (leave it unset for none)");
  }
  plan.slice_size = static_cast<uint32_t>(slice);
  if (w.blocks.form == BlockSpec::Form::kRange) {
    const uint64_t local = IsRead(w) ? w.dst_offset : w.src_offset;
    const uint64_t remote_offset = IsRead(w) ? w.src_offset : w.dst_offset;
    RETURN_IF_ERROR(
        AppendSplit(local, remote_offset, w.length, plan.slice_size, &plan.blocks, "the range"));
  } else {
    RETURN_IF_ERROR(PlanMany(w, *plan.peer, plan.remote.size, &plan));
  }
  plan.lanes = plan.link->lane_count();
  plan.transport = transport_.kind();
  return plan;
}

// The peer's region as resolved: allows this direction, and (for a range)
// contains it. Blocks are checked one by one when planned.
absl::StatusOr<ResolvedRegion> Engine::CheckRemote(const WriteSpec& w, const Peer& peer,
                                                   RemoteKeySnapshot& keys, bool* stale) const {
  const std::string& name = RemoteRegionName(w);
  std::optional<ResolvedRegion> remote = keys.Find(peer, name);
  if (!remote) {
    *stale = true;
    return absl::UnavailableError(absl::StrCat("region '", name, "' on peer '", peer.node_id(),
                                               "' was invalidated while this was submitted"));
  }
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
  return *std::move(remote);
}

// Expands and checks a many-block request into plan->blocks, and records
// its block count and bytes in the spec the transfer keeps.
absl::Status Engine::PlanMany(const WriteSpec& w, const Peer& peer, uint64_t remote_size,
                              Transfer::Plan* plan) const {
  const absl::Time start = absl::Now();
  const RegionSide local{LocalRegion(w), "", plan->local->size()};
  const RegionSide remote{RemoteRegionName(w), peer.node_id(), remote_size};
  ASSIGN_OR_RETURN(plan->blocks,
                   PlanBlocks(w.blocks, IsRead(w) ? remote : local, IsRead(w) ? local : remote,
                              !IsRead(w), plan->slice_size));
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

absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> Engine::Admit(
    const std::vector<WriteSpec>& writes, bool batch, absl::Time submitted_at, bool* stale) {
  std::vector<Transfer::Plan> plans;
  plans.reserve(writes.size());
  RemoteKeySnapshot keys;
  for (size_t i = 0; i < writes.size(); ++i) {
    absl::StatusOr<Transfer::Plan> plan = Plan(writes[i], keys, stale);
    if (!plan.ok()) return ForWrite(plan.status(), i, writes.size());
    plans.push_back(*std::move(plan));
  }
  RETURN_IF_ERROR(table_.Admit(static_cast<uint32_t>(plans.size())));
  const uint64_t batch_id = batch ? table_.NextBatchId() : 0;
  std::vector<std::shared_ptr<Transfer>> transfers;
  transfers.reserve(plans.size());
  for (Transfer::Plan& plan : plans) {
    plan.id = table_.NextId();
    plan.batch_id = batch_id;
    plan.submitted_at = submitted_at;
    plan.home_poller = static_cast<uint32_t>(plan.id % plan.lanes);
    auto transfer = std::make_shared<Transfer>(std::move(plan), this);
    table_.Insert(transfer);
    transfers.push_back(std::move(transfer));
  }
  for (const std::shared_ptr<Transfer>& t : transfers) {
    const Transfer::Plan& p = t->plan();
    spdlog::debug(
        "transfer id={} queued direction={} peer={} transport={} src={}+{} dst={}+{} bytes={} "
        "blocks={} ops={}",
        t->id(), IsRead(p.spec) ? "read" : "write", p.peer->node_id(),
        transport::TransportKindName(p.transport), p.spec.src_region, p.spec.src_offset,
        p.spec.dst_region, p.spec.dst_offset, p.spec.length, t->blocks(), t->ops());
    if (t->deadline() != absl::InfiniteFuture()) deadlines_.Add(t);
    if (p.stage_ranges) {
      // The ranges precede every op of the write (docs/many-blocks.md).
      executor_.Run([this, t] {
        SendRanges(rpc_, self_, *t);
        Launch(t);
      });
    } else {
      Launch(t);
    }
  }
  return transfers;
}

void Engine::Launch(const std::shared_ptr<Transfer>& t) {
  // A single-op transfer needs its home poller alone.
  if (t->ops() == 1) {
    pollers_->at(t->plan().home_poller).Submit(t);
    return;
  }
  for (uint32_t p = 0; p < t->plan().lanes; ++p) pollers_->at(p).Submit(t);
}

std::shared_ptr<Transfer> Engine::FindTransfer(uint64_t id) const { return table_.FindLive(id); }

absl::StatusOr<TransferInfo> Engine::GetTransfer(uint64_t id) const {
  std::optional<TransferInfo> info = table_.Lookup(id);
  if (!info) {
    return absl::NotFoundError(absl::StrCat("no transfer with id ", id,
                                            " (finished transfers are kept up to engine.history)"));
  }
  return *std::move(info);
}

absl::StatusOr<TransferInfo> Engine::CancelTransfer(uint64_t id) {
  // Cancelling a finished transfer returns it unchanged.
  if (std::shared_ptr<Transfer> t = table_.FindLive(id)) {
    t->Finish(TransferState::kCancelled, absl::CancelledError("cancelled on request"));
  }
  return GetTransfer(id);
}

std::vector<TransferInfo> Engine::ListTransfers(const TransferFilter& filter) const {
  return table_.List(filter);
}

}  // namespace xferd::engine
