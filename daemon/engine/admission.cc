// Admission: the front door of transfers.
#include "daemon/engine/admission.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/engine/landed_ranges.h"

namespace xferd::engine {
namespace {

// Requests in one batch: validation is all-or-nothing, so a batch is bounded.
constexpr size_t kMaxBatch = 4096;
// Bound on resolving a batch's destination regions with their peers.
constexpr absl::Duration kResolveTimeout = absl::Seconds(10);

// Names the request of a batch an error is about.
absl::Status ForRequest(const absl::Status& status, size_t index, size_t count) {
  if (status.ok() || count == 1) return status;
  return absl::Status(status.code(), absl::StrCat("write #", index, ": ", status.message()));
}

}  // namespace

Admission::Admission(const Lifecycle& life, const Tenants& tenants, PeerManager& peers,
                     const TransferPlanner& planner, TransferRunner& runner, PeerRpc& rpc,
                     ControlExecutor& executor)
    : life_(life),
      tenants_(tenants),
      peers_(peers),
      planner_(planner),
      runner_(runner),
      rpc_(rpc),
      executor_(executor) {}

void Admission::Submit(std::vector<TransferSpec> specs, bool batch,
                       Callback<std::vector<std::shared_ptr<Transfer>>> reply) {
  // Timeouts run from here: time spent reconnecting or resolving counts.
  const absl::Time submitted_at = absl::Now();
  // Every refusal, whichever path reports it, is counted once, under the
  // class of its first request.
  const Priority priority = specs.empty() ? Priority::kNormal : specs.front().priority;
  auto done = [this, priority, reply = std::move(reply)](
                  absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> result) {
    if (!result.ok()) runner_.CountRefused(result.status(), priority);
    reply(std::move(result));
  };
  if (life_.draining()) {
    done(absl::UnavailableError("daemon is shutting down: no new transfers"));
    return;
  }
  if (specs.empty()) {
    done(absl::InvalidArgumentError("no writes given"));
    return;
  }
  if (specs.size() > kMaxBatch) {
    done(absl::InvalidArgumentError(
        absl::StrCat("batch of ", specs.size(), " writes; at most ", kMaxBatch, " per batch")));
    return;
  }
  // What can be checked here is checked first: a bad local side is reported
  // as such, without waiting on (or blaming) the peer.
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].tenant == nullptr) specs[i].tenant = &tenants_.Default();
    absl::Status local = specs[i].tenant->CheckPriority(specs[i].priority);
    if (local.ok()) local = planner_.CheckLocal(specs[i]);
    if (local.ok() && peers_.Find(specs[i].peer) == nullptr && !peers_.has_node_directory()) {
      local = absl::NotFoundError(absl::StrCat("no peer '", specs[i].peer,
                                               "' (by node id or address): connect it first "
                                               "with ConnectPeer"));
    }
    if (!local.ok()) {
      done(ForRequest(local, i, specs.size()));
      return;
    }
  }
  if (Ready(specs)) {  // the common case: validate and queue right here
    bool stale = false;
    absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> admitted =
        Admit(specs, batch, submitted_at, &stale);
    if (!stale) {
      done(std::move(admitted));
      return;
    }
  }
  executor_.Run(
      [this, specs = std::move(specs), batch, submitted_at, done = std::move(done)]() mutable {
        done(ResolveAndAdmit(specs, batch, submitted_at));
      });
}

bool Admission::Ready(const std::vector<TransferSpec>& specs) const {
  for (const TransferSpec& w : specs) {
    std::shared_ptr<Peer> peer = peers_.Find(w.peer);
    if (peer == nullptr || peer->link()->broken()) return false;
    if (!peer->is_self() && !peer->CachedRegion(RemoteRegionName(w))) return false;
  }
  return true;
}

// On the control executor. A peer's link may break, or a remote region's key
// be invalidated, between resolution and admission (a region deregistered on
// the peer just then): that is this daemon's race, not the client's, so the
// requests are resolved again until their deadline, and the answer is the
// peer's real one (e.g. NOT_FOUND once the region is gone).
absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> Admission::ResolveAndAdmit(
    const std::vector<TransferSpec>& specs, bool batch, absl::Time submitted_at) {
  // No request may wait on its peer past its own deadline (a partition).
  absl::Duration budget = kResolveTimeout;
  for (const TransferSpec& w : specs) budget = std::min(budget, w.timeout);
  const absl::Time deadline = submitted_at + budget;
  RETURN_IF_ERROR(ConnectUnknown(specs, deadline));
  while (true) {
    RETURN_IF_ERROR(ReconnectBroken(specs, deadline));
    RETURN_IF_ERROR(ResolveMissing(specs, deadline));
    bool stale = false;
    absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> admitted =
        Admit(specs, batch, submitted_at, &stale);
    if (!stale) return admitted;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(admitted.status().message(), ", again and again until the deadline (",
                       absl::FormatDuration(budget), "): retry later"));
    }
  }
}

// A request to a node never connected: its address comes from the node
// directory, and the handshake runs within the request's deadline.
absl::Status Admission::ConnectUnknown(const std::vector<TransferSpec>& specs,
                                       absl::Time deadline) {
  if (!peers_.has_node_directory()) return absl::OkStatus();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (peers_.Find(specs[i].peer) != nullptr) continue;
    RETURN_IF_ERROR(ForRequest(peers_.ConnectNode(specs[i].peer, deadline), i, specs.size()));
  }
  return absl::OkStatus();
}

absl::Status Admission::ReconnectBroken(const std::vector<TransferSpec>& specs,
                                        absl::Time deadline) {
  for (size_t i = 0; i < specs.size(); ++i) {
    std::shared_ptr<Peer> peer = peers_.Find(specs[i].peer);
    if (peer == nullptr || !peer->link()->broken()) continue;
    RETURN_IF_ERROR(ForRequest(peers_.Reconnect(*peer, deadline), i, specs.size()));
  }
  return absl::OkStatus();
}

absl::Status Admission::ResolveMissing(const std::vector<TransferSpec>& specs,
                                       absl::Time deadline) {
  absl::flat_hash_set<std::pair<std::string, std::string>> asked;
  for (size_t i = 0; i < specs.size(); ++i) {
    const TransferSpec& w = specs[i];
    std::shared_ptr<Peer> peer = peers_.Find(w.peer);
    const std::string& name = RemoteRegionName(w);
    if (peer == nullptr || peer->is_self() || peer->link()->broken()) continue;
    if (peer->CachedRegion(name)) continue;
    if (!asked.insert({peer->node_id(), name}).second) continue;
    const char* role = IsRead(w) ? "source" : "destination";
    RETURN_IF_ERROR(ForRequest(peers_.Resolve(*peer, name, role, deadline), i, specs.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> Admission::Admit(
    const std::vector<TransferSpec>& specs, bool batch, absl::Time submitted_at, bool* stale) {
  std::vector<Transfer::Plan> plans;
  plans.reserve(specs.size());
  RemoteKeySnapshot keys;
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::StatusOr<Transfer::Plan> plan = planner_.Plan(specs[i], keys, stale);
    if (!plan.ok()) return ForRequest(plan.status(), i, specs.size());
    plans.push_back(*std::move(plan));
  }
  ASSIGN_OR_RETURN(std::vector<std::shared_ptr<Transfer>> transfers,
                   runner_.Admit(std::move(plans), batch, submitted_at));
  for (const std::shared_ptr<Transfer>& t : transfers) {
    if (t->plan().stage_ranges) {
      // The ranges precede every op of the write (docs/many-blocks.md).
      executor_.Run([this, t] {
        SendRanges(rpc_, life_.self(), *t);
        runner_.Start(t);
      });
    } else {
      runner_.Start(t);
    }
  }
  return transfers;
}

}  // namespace xferd::engine
