// The daemon's transfers once planned: admits them against the in-flight
// limit, starts them on the pollers (and their deadlines), ends them on
// request (cancel, a peer or region going away, shutdown), hears of their
// end (counted where it is decided; recorded for metrics, filed into
// history, logged and announced on the notes thread) and answers lookups.
// Any thread unless said.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/common/config.h"
#include "daemon/engine/deadline_timer.h"
#include "daemon/engine/notes.h"
#include "daemon/engine/observers.h"
#include "daemon/engine/poller.h"
#include "daemon/engine/transfer.h"
#include "daemon/engine/transfer_table.h"
#include "daemon/transport/transport.h"

namespace xferd::engine {

class TransferRunner final : public TransferListener {
 public:
  // `timer` outlives the runner.
  TransferRunner(const EngineConfig& config, DeadlineTimer& timer);
  ~TransferRunner() override;

  // Starts the notes thread and the pollers, one per worker of `transport`
  // (which outlives them), before any transfer. RESOURCE_EXHAUSTED if
  // eventfds cannot be made.
  absl::Status StartPollers(transport::Transport& transport);

  // Transfers for `plans` (all or none: RESOURCE_EXHAUSTED names the
  // limit), with ids (and a batch id if `batch`) and their deadlines
  // running, not started yet.
  absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> Admit(std::vector<Transfer::Plan> plans,
                                                               bool batch,
                                                               absl::Time submitted_at);
  // Hands an admitted transfer to its pollers.
  void Start(const std::shared_ptr<Transfer>& transfer);
  // A submission refused before any transfer started, counted by code and
  // class.
  void CountRefused(const absl::Status& error, Priority priority) {
    table_.CountRefused(error, priority);
  }

  // The pollers, poller i at [i], as what hears of ops (the lanes of the
  // engine's SelfLink). After StartPollers.
  std::vector<transport::CompletionSink*> completion_sinks();

  // ---- lookups ----
  // The transfer while it is still kept whole (to watch it); null once only
  // its snapshot remains or if unknown.
  std::shared_ptr<Transfer> FindLive(uint64_t id) const { return table_.FindLive(id); }
  // Its state, live or from history. NOT_FOUND if unknown or evicted.
  absl::StatusOr<TransferInfo> Get(uint64_t id) const;
  std::vector<TransferInfo> List(const TransferFilter& filter) const {
    return table_.List(filter);
  }
  TransferCounters counters() const { return table_.counters(); }
  std::vector<PollerStats> poller_stats() const;

  // ---- ending ----
  // Cancels it unless it already ended; returns its state either way.
  absl::StatusOr<TransferInfo> Cancel(uint64_t id);
  // Ends the transfers in flight that `match` with `reason` (CANCELLED:
  // cancelled, else failed); returns how many this ended.
  uint32_t EndWhere(const std::function<bool(const Transfer&)>& match, const absl::Status& reason);
  // Calls `visit` with every transfer in flight now.
  void EachInFlight(const std::function<void(const Transfer&)>& visit) const {
    for (const std::shared_ptr<Transfer>& t : table_.InFlight()) visit(*t);
  }
  // Waits until no transfer is in flight or the deadline passes; true if idle.
  bool WaitIdle(absl::Time deadline) const;
  // Finished transfers that read from a region must let go of it for its
  // memory to be released; their last completions may take a moment. Sweeps
  // for up to 2 s from the calling (control) thread.
  void SweepUntilReleased();
  // Shutdown, once links are closed: lets the pollers hand back what is
  // still posted (up to 2 s), stops them, then stops the notes thread once
  // it has finished what was noted. After it, an end is finished on the
  // thread that decides it, and the recorder may be cleared. Idempotent.
  void Stop();

  // Serves `source` on the poller with the fewest (returned) from now on,
  // until DetachSource. Any thread.
  uint32_t AttachSource(std::shared_ptr<PollSource> source);
  void DetachSource(uint32_t poller, std::shared_ptr<PollSource> source);

  // Who hears of transfers' ends (set before transfers start, cleared after
  // the pollers stop).
  void SetRecorder(TransferRecorder* recorder);
  // Who looks into failures the transport could not explain and ends their
  // transfer (set once, before transfers start); none: they end as they are.
  using Explainer = std::function<void(std::shared_ptr<Transfer> transfer, absl::Status error)>;
  void SetExplainer(Explainer explainer) { explainer_ = std::move(explainer); }
  // Who checks verified transfers at their peer (docs/integrity.md) and ends
  // them (set once, before transfers start).
  using Verifier = std::function<void(std::shared_ptr<Transfer> transfer)>;
  void SetVerifier(Verifier verifier) { verifier_ = std::move(verifier); }

  // TransferListener: counts the end and marks a vanished region's key gone
  // before the end is visible (lock-free, on the deciding thread); then
  // queues the rest for the notes thread (Finished) and wakes the pollers
  // still holding the transfer, to let go of it. A failure the transport
  // could not explain goes to the explainer first.
  void OnTransferEnding(const Transfer& transfer, TransferState state,
                        absl::StatusCode code) override;
  void OnTransferEnded(Transfer& transfer) override;
  bool ExplainFailure(const Transfer& transfer, const absl::Status& error) override;
  bool VerifyAtPeer(const Transfer& transfer) override;

 private:
  // The notes thread: records, files, logs and announces an ended transfer.
  void Finished(Transfer& transfer);
  static void Log(const TransferInfo& info);
  // Sweeps the transfer table after `delay` (see transfer_runner.cc).
  void SweepLater(absl::Duration delay);

  const EngineConfig& config_;
  TransferTable table_;
  DeadlineTimer& timer_;
  std::unique_ptr<Notes> notes_;
  std::unique_ptr<PollerPool> pollers_;
  bool stopped_ = false;  // Stop(): from Engine::Stop() (once), then ~TransferRunner
  std::atomic<bool> sweep_pending_{false};
  std::atomic<TransferRecorder*> recorder_{nullptr};
  Explainer explainer_;
  Verifier verifier_;
};

}  // namespace xferd::engine
