// The verbs transport's per-poller worker: one completion queue (with its
// completion channel) shared by this poller's queue pair to every peer, and
// the table that maps a completion's wr_id back to its lane. CQ entries are
// reserved per queue pair when it is created, so the CQ can never overflow.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "daemon/base/mutex.h"
#include "daemon/common/unique_fd.h"
#include "daemon/common/wake_inbox.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/verbs_context.h"
#include "daemon/transport/verbs/verbs_lane.h"

namespace xferd::transport::verbs {

class VerbsWorker final : public TransportWorker {
 public:
  // `chain_capacity`: work requests one post may chain (the deepest send
  // queue of any lane).
  static absl::StatusOr<std::unique_ptr<VerbsWorker>> Create(std::shared_ptr<VerbsContext> context,
                                                             uint32_t cq_entries,
                                                             uint32_t chain_capacity,
                                                             const memory::RegionRegistry& regions);
  // Releases the QPs still in the table before the CQ goes.
  ~VerbsWorker() override;

  uint32_t Poll(CompletionSink& sink) override;
  int wait_fd() const override { return epoll_.get(); }
  bool PrepareToSleep() override;

  ibv_cq* cq() const { return cq_.get(); }
  VerbsContext& context() const { return *context_; }
  // The chain a lane builds while posting, shared by this worker's lanes:
  // they post one at a time, on this worker's thread.
  ibv_send_wr* chain_wrs() { return chain_wrs_.data(); }
  ibv_sge* chain_sges() { return chain_sges_.data(); }
  uint32_t chain_capacity() const { return static_cast<uint32_t>(chain_wrs_.size()); }

  // Control thread: enters a lane (its QP about to be created) in the table
  // and reserves `cq_entries` completions for it. RESOURCE_EXHAUSTED when the
  // CQ or the table is full (too many peers for this poller).
  absl::StatusOr<uint32_t> AddLane(VerbsLane* lane, uint32_t cq_entries);
  // Any thread: drain and release the lane's QP on this worker's thread.
  // `keep_alive` owns the lane and is held until the QP is gone.
  void RequestDetach(std::shared_ptr<Link> keep_alive, VerbsLane* lane);
  // A lane destroyed without that drain (its link dropped while the pollers
  // no longer run: the transport shutting down, a test pumping by hand)
  // leaves the table here, so nothing follows a pointer to it. Its slot is
  // not reused: the CQ may still hold completions of its QP, which Poll then
  // skips. Called by ~VerbsLane while in_table(), with this worker's poller
  // stopped.
  void ForgetLane(VerbsLane* lane);
  // Control thread: post `job`'s binds on the lane's QP from this worker's
  // thread (it alone posts there); the job's windows hear when they ran.
  // `keep_alive` owns the lane.
  void RequestBind(std::shared_ptr<Link> keep_alive, VerbsLane* lane, BindJob job);
  // Queue pairs alive on this worker (for stats and leak checks).
  uint32_t queue_pairs() const { return lanes_.load(std::memory_order_relaxed); }
  // Poller thread: lists `lane` among those with ops waiting for room in
  // their send queue (served each Poll), once.
  void ListWaiting(VerbsLane* lane);

 private:
  struct Detaching {
    VerbsLane* lane;
    std::shared_ptr<Link> keep_alive;
  };
  using Inbox = WakeInbox<Detaching>;
  struct Binding {
    VerbsLane* lane;
    std::shared_ptr<Link> keep_alive;
    BindJob job;
  };
  using BindInbox = WakeInbox<Binding>;

  VerbsWorker(std::shared_ptr<VerbsContext> context, uint32_t chain_capacity,
              const memory::RegionRegistry& regions);
  // Lets each listed lane post (or fail) its waiting ops; unlists those with
  // none left. Returns the lanes unlisted.
  uint32_t ServiceWaitingLanes(CompletionSink& sink);
  void ReapDrained();
  void ConsumeChannelEvents();

  const std::shared_ptr<VerbsContext> context_;
  const memory::RegionRegistry& regions_;
  // Dependency order: the channel before the CQ that reports to it.
  IbvCompChannel channel_;
  IbvCq cq_;
  std::unique_ptr<Inbox> inbox_;  // lanes to detach
  std::unique_ptr<BindInbox> binds_;  // grants to bind, from control threads
  UniqueFd epoll_;  // the channel's fd and the inboxes': what a sleeping poller waits on
  std::vector<std::atomic<VerbsLane*>> table_;
  std::vector<ibv_send_wr> chain_wrs_;
  std::vector<ibv_sge> chain_sges_;

  Mutex mu_;
  std::vector<uint32_t> free_slots_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> reserved_ ABSL_GUARDED_BY(mu_);  // CQ entries per slot
  uint32_t cq_capacity_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t cq_reserved_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint32_t> lanes_{0};

  // Poller thread only.
  std::vector<Detaching> draining_;
  // Lanes holding ops or binds the send queue had no room for.
  std::vector<VerbsLane*> waiting_lanes_;
  bool armed_ = false;
  uint32_t unacked_events_ = 0;
};

}  // namespace xferd::transport::verbs
