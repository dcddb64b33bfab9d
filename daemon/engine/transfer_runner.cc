// TransferRunner: admission, start, end and bookkeeping of transfers.
#include "daemon/engine/transfer_runner.h"

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/engine/peer.h"

namespace xferd::engine {
namespace {

// Sweeps after a transfer ended still held: 10 ms, doubling, up to ~2.5 s.
constexpr absl::Duration kFirstSweepDelay = absl::Milliseconds(10);
constexpr absl::Duration kLastSweepDelay = absl::Milliseconds(1280);
// Notes beyond twice the in-flight limit: landings of peers' writes.
constexpr size_t kNotesSlack = 4096;

}  // namespace

TransferRunner::TransferRunner(const EngineConfig& config, DeadlineTimer& timer)
    : config_(config),
      table_(config.max_inflight_transfers, config.priorities.critical_reserve, config.history),
      timer_(timer) {}

absl::Status TransferRunner::StartPollers(transport::Transport& transport) {
  // Room for every transfer in flight to end at once, and as many landings.
  const size_t notes = 2 * size_t{config_.max_inflight_transfers} + kNotesSlack;
  ASSIGN_OR_RETURN(notes_, Notes::Create(notes, [this](Transfer& t) { Finished(t); }));
  PollerOptions options;
  options.spin = config_.spin;
  options.spin_max = config_.spin_max;
  options.slice = config_.poller_slice;
  options.max_transfers = config_.max_inflight_transfers;
  const PriorityConfig& priorities = config_.priorities;
  options.weights[PriorityIndex(Priority::kNormal)] = priorities.normal_weight;
  options.weights[PriorityIndex(Priority::kBulk)] = priorities.bulk_weight;
  options.weights[PriorityIndex(Priority::kBackground)] = priorities.background_weight;
  options.lane_bytes = priorities.lane_bytes;
  // Those configured and "default" (one too many if it is configured: an
  // unused slot).
  options.tenants = static_cast<uint32_t>(config_.tenants.size() + 1);
  ASSIGN_OR_RETURN(pollers_, PollerPool::Create(transport, config_.pollers, options, *notes_));
  pollers_->Start();
  return absl::OkStatus();
}

TransferRunner::~TransferRunner() { Stop(); }

absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> TransferRunner::Admit(
    std::vector<Transfer::Plan> plans, bool batch, absl::Time submitted_at) {
  RETURN_IF_ERROR(table_.Admit(plans));
  const uint64_t batch_id = batch ? table_.NextBatchId() : 0;
  std::vector<std::shared_ptr<Transfer>> transfers;
  transfers.reserve(plans.size());
  for (Transfer::Plan& plan : plans) {
    plan.id = table_.NextId();
    plan.batch_id = batch_id;
    plan.submitted_at = submitted_at;
    plan.home_poller = plan.poller >= 0 && static_cast<uint32_t>(plan.poller) < plan.lanes
                           ? static_cast<uint32_t>(plan.poller)
                           : static_cast<uint32_t>(plan.id % plan.lanes);
    auto transfer = std::make_shared<Transfer>(std::move(plan), this);
    table_.Insert(transfer);
    const Transfer::Plan& p = transfer->plan();
    spdlog::debug(
        "transfer id={} queued direction={} peer={} transport={} src={}+{} dst={}+{} bytes={} "
        "blocks={} ops={}",
        transfer->id(), IsRead(p.spec) ? "read" : "write", p.peer->node_id(),
        transport::TransportKindName(p.transport), p.spec.src_region, p.spec.src_offset,
        p.spec.dst_region, p.spec.dst_offset, p.spec.length, transfer->blocks(), transfer->ops());
    if (transfer->deadline() != absl::InfiniteFuture()) timer_.Add(transfer);
    transfers.push_back(std::move(transfer));
  }
  return transfers;
}

void TransferRunner::Start(const std::shared_ptr<Transfer>& t) {
  // A single-op transfer needs its home poller alone.
  if (t->ops() == 1) {
    pollers_->at(t->plan().home_poller).Submit(t);
    return;
  }
  for (uint32_t p = 0; p < t->plan().lanes; ++p) pollers_->at(p).Submit(t);
}

absl::StatusOr<TransferInfo> TransferRunner::Get(uint64_t id) const {
  std::optional<TransferInfo> info = table_.Lookup(id);
  if (!info) {
    return absl::NotFoundError(absl::StrCat("no transfer with id ", id,
                                            " (finished transfers are kept up to engine.history)"));
  }
  return *std::move(info);
}

std::vector<transport::CompletionSink*> TransferRunner::completion_sinks() {
  std::vector<transport::CompletionSink*> sinks;
  for (uint32_t i = 0; i < pollers_->size(); ++i) sinks.push_back(&pollers_->at(i));
  return sinks;
}

std::vector<PollerStats> TransferRunner::poller_stats() const {
  std::vector<PollerStats> stats;
  for (uint32_t i = 0; i < pollers_->size(); ++i) stats.push_back(pollers_->at(i).stats());
  return stats;
}

absl::StatusOr<TransferInfo> TransferRunner::Cancel(uint64_t id) {
  // Cancelling a finished transfer returns it unchanged.
  if (std::shared_ptr<Transfer> t = table_.FindLive(id)) {
    t->Finish(TransferState::kCancelled, absl::CancelledError("cancelled on request"));
    t->AwaitEnd();  // whoever decided, the answer shows the end
  }
  return Get(id);
}

uint32_t TransferRunner::EndWhere(const std::function<bool(const Transfer&)>& match,
                                  const absl::Status& reason) {
  uint32_t ended = 0;
  const TransferState state = reason.code() == absl::StatusCode::kCancelled
                                  ? TransferState::kCancelled
                                  : TransferState::kFailed;
  for (const std::shared_ptr<Transfer>& t : table_.InFlight()) {
    if (!match(*t)) continue;
    if (t->Finish(state, reason)) ++ended;
    t->AwaitEnd();  // the caller acts on the ends next (a region's users)
  }
  return ended;
}

bool TransferRunner::WaitIdle(absl::Time deadline) const {
  while (table_.counters().in_flight > 0) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

void TransferRunner::SweepUntilReleased() {
  for (int i = 0; i < 200 && table_.Sweep() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
}

void TransferRunner::Stop() {
  // Engine::Stop() and then the destructor: the second finds nothing to do
  // and must not wait out the sweep again.
  if (stopped_) return;
  stopped_ = true;
  if (pollers_ != nullptr) {
    // Closing links makes the pollers fail what is still posted; give them
    // a moment to hand those completions back before they stop.
    const absl::Time deadline = absl::Now() + absl::Seconds(2);
    while (table_.Sweep() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    pollers_->Stop();
  }
  // Last: ends decided on the way down (shutdown fails what is left) reach
  // history, the recorder and their observers before Stop returns; the
  // caller may clear the recorder next.
  if (notes_ != nullptr) notes_->Stop();
}

uint32_t TransferRunner::AttachSource(std::shared_ptr<PollSource> source) {
  const uint32_t index = pollers_->LeastSources();
  pollers_->at(index).Attach(std::move(source));
  return index;
}

void TransferRunner::DetachSource(uint32_t poller, std::shared_ptr<PollSource> source) {
  pollers_->at(poller).Detach(std::move(source));
}

void TransferRunner::SetRecorder(TransferRecorder* recorder) {
  recorder_.store(recorder, std::memory_order_release);
}

void TransferRunner::OnTransferEnding(const Transfer& transfer, TransferState state,
                                      absl::StatusCode code) {
  table_.Count(transfer, state, code);
  // The peer no longer knows the region: its key goes before the next write.
  if (code == absl::StatusCode::kNotFound && transfer.plan().remote_key != nullptr) {
    transfer.plan().remote_key->gone.store(true, std::memory_order_release);
  }
}

void TransferRunner::OnTransferEnded(Transfer& transfer) {
  // Usually none: a poller lets go once it has posted its part, before the
  // end. Ends decided elsewhere (an explained failure, a cancel, another
  // poller's failed op) can find one asleep with nothing else to wake it.
  for (uint64_t held = transfer.holders(); held != 0; held &= held - 1) {
    pollers_->at(static_cast<uint32_t>(__builtin_ctzll(held))).Wake();
  }
  notes_->Ended(transfer);
}

// The end of a transfer's life in the log, as key=value pairs after the
// event: done at debug, cancelled at info, failed at warn.
void TransferRunner::Finished(Transfer& transfer) {
  const TransferInfo info = transfer.Info();
  if (TransferRecorder* recorder = recorder_.load(std::memory_order_acquire)) {
    recorder->RecordTransfer(info);
  }
  Log(info);
  transfer.Announce(info);
  // Last touch: retiring may let the table drop the last reference.
  if (table_.Retire(info.id) > 0) SweepLater(kFirstSweepDelay);
}

bool TransferRunner::ExplainFailure(const Transfer& transfer, const absl::Status& error) {
  if (!explainer_) return false;
  std::shared_ptr<Transfer> live = table_.FindLive(transfer.id());
  if (live == nullptr) return false;
  explainer_(std::move(live), error);
  return true;
}

bool TransferRunner::VerifyAtPeer(const Transfer& transfer) {
  if (!verifier_) return false;
  std::shared_ptr<Transfer> live = table_.FindLive(transfer.id());
  if (live == nullptr) return false;
  verifier_(std::move(live));
  return true;
}

void TransferRunner::Log(const TransferInfo& info) {
  const bool done = info.state == TransferState::kDone;
  if (done && !spdlog::should_log(spdlog::level::debug)) return;
  const absl::Duration duration = info.finished_at - info.submitted_at;
  const absl::string_view transport = transport::TransportKindName(info.transport);
  if (done) {
    spdlog::debug("transfer id={} done peer={} transport={} bytes={} duration={}", info.id,
                  info.peer_node, transport, info.bytes_done, absl::FormatDuration(duration));
    return;
  }
  spdlog::log(info.state == TransferState::kCancelled ? spdlog::level::info : spdlog::level::warn,
              "transfer id={} {} direction={} peer={} transport={} dst={} bytes={}/{} duration={} "
              "code={} error={:?}",
              info.id, TransferStateName(info.state), IsRead(info.spec) ? "read" : "write",
              info.peer_node, transport, info.spec.dst_region, info.bytes_done, info.spec.length,
              absl::FormatDuration(duration), absl::StatusCodeToString(info.error.code()),
              info.error.message());
}

// A transfer that just ended is usually still held by the thread that ended
// it, or by completions still on their way, so Retire cannot reduce it to its
// snapshot yet. Until something reduces it, its block plan (24 bytes a block)
// stays resident: on a daemon that goes idle after a big transfer, nothing
// would. So sweep again shortly after, backing off while something still
// holds a transfer, and give up after a few seconds (a client holding one
// that long lets go before long, and the next transfer's end sweeps again).
void TransferRunner::SweepLater(absl::Duration delay) {
  if (delay == kFirstSweepDelay && sweep_pending_.exchange(true)) return;
  timer_.RunAt(absl::Now() + delay, [this, delay] {
    if (table_.Sweep() > 0 && delay < kLastSweepDelay) {
      SweepLater(delay * 2);
      return;
    }
    sweep_pending_.store(false);
  });
}

}  // namespace xferd::engine
