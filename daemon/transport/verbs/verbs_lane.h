// One RC queue pair to a peer, owned by one poller thread. Posting turns
// each op into one work request per block (RDMA WRITE, or RDMA READ into
// the local region), chains all of a call's requests into one
// ibv_post_send, signals selectively, and keeps a slot per work request so
// each op's completion (or its first error) is reported exactly once. Ops
// whose requests do not fit the send queue yet wait in the lane, in order.
// Receives of WRITE_WITH_IMM carry the peer's landing notices. The lane
// also posts the binds of the memory windows granted to its peer, as its
// send queue has room for them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/ibv.h"
#include "daemon/transport/verbs/memory_windows.h"
#include "daemon/transport/verbs/queue_pair.h"
#include "daemon/transport/verbs/stripe_members.h"
#include "daemon/transport/verbs/verbs_constants.h"

namespace xferd::transport::verbs {

class VerbsWorker;

// Where this lane's notice records live: ours (incoming, outgoing) and the
// peer's ring we write into.
struct NoticeArea {
  const uint8_t* incoming = nullptr;  // kNoticeSlots records the peer writes
  uint8_t* outgoing = nullptr;        // kNoticeSlots records we send from
  uint32_t outgoing_lkey = 0;
  uint64_t remote_addr = 0;  // the peer's slots for this lane
  uint32_t remote_rkey = 0;
};

class VerbsLane final : public PairLane {
 public:
  // `ops_depth`: ops the lane holds at most (posted or waiting); `send_depth`:
  // the send queue's work requests (>= kMaxWrsPerOp, <= the worker's chain
  // capacity).
  // `counters`: where the bytes count (the striped link's, shared by its
  // devices); `local_device`: the device of `worker` (which lkeys to use);
  // `lane`: its position in its link (which of a peer's per-lane keys).
  VerbsLane(Link& link, LinkCounters& counters, VerbsWorker& worker, uint32_t ops_depth,
            uint32_t send_depth, uint32_t local_device, uint32_t lane);
  ~VerbsLane() override;

  // Ops the lane takes now: ops_depth less those it holds, posted or waiting
  // for room in the send queue (0 while connecting, draining or broken).
  // Each op carries at most kMaxBlocksPerOp blocks, so this bounds blocks in
  // flight; the send queue is bounded by the ops' actual work requests.
  uint32_t credits() const override;
  bool broken() const override { return link_.broken(); }

  // ---- control thread, before the link is published ----
  // Creates the QP in INIT with its receives posted and enters it in the
  // worker's lane table.
  absl::Status Create(ibv_pd* pd, uint8_t port, uint32_t max_inline);
  QueuePairEndpoint local_endpoint(const QpPath& path, const std::array<uint8_t, 16>& gid,
                                   uint16_t lid) const;
  // INIT -> RTR -> RTS towards the peer's queue pair.
  // `remote_device`: the peer's device index, whose region keys to use.
  absl::Status Activate(const QpPath& path, const QueuePairEndpoint& remote, NoticeArea notices,
                        uint32_t remote_device);
  void set_reporter(OpReporter* reporter, uint32_t sub) override {
    reporter_ = reporter;
    sub_ = sub;
  }
  uint32_t remote_device() const { return remote_device_; }
  // Set by Create; still readable once the QP is gone.
  uint32_t qp_num() const { return qp_num_; }
  bool Reaches(const RemoteRegion& remote) const override {
    return remote.has_lane_keys(remote_device_, lane_, remote_qpn_);
  }
  Link& link() { return link_; }

  // ---- poller thread ----
  // Takes ops while credits() > 0 (all of them unless the link broke) and
  // posts those that fit the send queue; the rest wait, and the worker lists
  // the lane (see ServiceWaiting). Returns the ops taken; each is reported
  // once through OnOpDone or ServiceWaiting.
  uint32_t Post(absl::Span<const DataOp> ops) override;
  // Once per Poll while ops wait: posts those that fit now, in order; on a
  // broken or draining lane, once every posted request is back, fails them
  // with the link's status (after the posted ones: completions stay in
  // order). Returns true while some still wait.
  bool ServiceWaiting(CompletionSink& sink);
  // Takes a grant's binds for this lane and posts what fits; the rest wait
  // (see ServiceWaiting). True while some wait. A lane that is closing
  // fails the job at once.
  bool AddBind(BindJob job);
  void OnSendCompletion(const ibv_wc& wc, CompletionSink& sink);
  void OnRecvCompletion(const ibv_wc& wc, const memory::RegionRegistry& regions,
                        CompletionSink& sink);
  // Moves the QP to ERR so everything outstanding flushes; drained() turns
  // true once every posted request has come back, then the QP can go.
  void BeginDrain();
  bool drained() const {
    return draining_ && posted_ == retired_ && recvs_posted_ == 0 && waiting_count_ == 0 &&
           pending_binds_.empty() && !listed_;
  }
  // Whether the worker lists the lane among those with waiting ops.
  bool listed() const { return listed_; }
  void set_listed(bool listed) { listed_ = listed; }
  uint32_t index() const { return index_; }
  // True while the lane has a slot in its worker's table (from Create until
  // the worker reaps it or is destroyed).
  bool in_table() const { return in_table_; }
  // The worker's side, when it reaps the drained lane or is destroyed: the
  // QP goes (its CQ is the worker's) and the lane leaves the table, so
  // nothing of the lane reaches the worker any more (it may be gone).
  void LeaveTable() {
    qp_.reset();
    in_table_ = false;
  }

 private:
  struct SendSlot {
    uint64_t cookie = 0;
    uint32_t length = 0;
    bool ends_op = false;    // the op's last work request: report it
    bool read = false;       // an RDMA READ (for the error message)
    bool ends_bind = false;  // a bind job's last request: its lane is bound
  };

  // Chains the waiting ops that fit the send queue, in order, and posts
  // them; stops at the first that does not fit (order is kept).
  void PostWaiting();
  // True if the op's requests fit the send queue's free entries now (the
  // chain being built counts as posted). Counts them only when the queue
  // has less room than any op can need.
  bool Fits(const DataOp& op) const;
  // The op's work requests: its blocks cut at MR chunks, and its notice.
  uint32_t WorkRequests(const DataOp& op) const;
  // Appends the work requests of one op to the chain (Fits checked).
  void AppendOp(const DataOp& op);
  // One block, cut where it crosses an MR chunk on either side.
  void AppendBlock(const DataOp& op, const Block& block);
  // The next request of the chain; its slot is marked as not ending an op.
  ibv_send_wr& AppendWr(ibv_wr_opcode opcode, uint64_t local, uint32_t length, uint32_t lkey,
                        uint64_t remote, uint32_t rkey, const DataOp* op);
  void Retire(uint64_t through_seq, const absl::Status* error, CompletionSink& sink);
  // Posts the waiting binds that fit the send queue, in order.
  void PostBinds();
  // Ends every bind job not yet wholly posted with `status`.
  void FailPendingBinds(const absl::Status& status);
  absl::Status PostReceives(uint32_t count);
  // Validates the peer's notice record in `slot` and hands its landing to
  // `sink`.
  void Land(uint32_t slot, const memory::RegionRegistry& regions, CompletionSink& sink);
  void Report(const OpCompletion& completion, CompletionSink& sink) {
    if (reporter_ != nullptr) {
      reporter_->OnLaneOpDone(sub_, completion, sink);
    } else {
      sink.OnOpDone(completion);
    }
  }

  Link& link_;
  LinkCounters& counters_;
  VerbsWorker& worker_;
  const uint32_t ops_depth_;
  const uint32_t sq_depth_;  // work requests
  const uint32_t psn_;       // our initial packet sequence number
  const uint32_t local_device_;
  const uint32_t lane_;
  uint32_t remote_device_ = 0;
  uint32_t remote_qpn_ = 0;
  uint32_t qp_num_ = 0;
  OpReporter* reporter_ = nullptr;
  uint32_t sub_ = 0;
  uint32_t index_ = 0;
  bool in_table_ = false;
  uint32_t max_inline_ = 0;
  IbvQp qp_;
  std::atomic<bool> active_{false};
  NoticeArea notices_;

  // Poller thread only. Send sequence numbers: (retired_, posted_] in flight.
  std::vector<SendSlot> slots_;
  uint64_t posted_ = 0;
  uint64_t retired_ = 0;
  uint32_t ops_in_flight_ = 0;  // taken and not yet reported: posted or waiting
  // Ops taken but not posted yet, oldest first: a ring of ops_depth_ (the
  // most the lane holds), so taking one never allocates. What they point to
  // stays valid until they are reported (DataOp's contract).
  std::vector<DataOp> waiting_;
  uint32_t waiting_head_ = 0;
  uint32_t waiting_count_ = 0;
  bool listed_ = false;
  uint32_t unsignaled_ = 0;
  uint32_t next_notice_ = 0;
  uint32_t recvs_posted_ = 0;
  uint32_t recvs_to_repost_ = 0;
  bool draining_ = false;
  // Bind jobs: those still to post (in part or whole), then those posted
  // whose last request has not completed. Binds are rare control work, so
  // these may allocate.
  std::deque<BindJob> pending_binds_;
  std::deque<BindJob> posted_binds_;
  // The chain being built by Post, in the worker's preallocated arrays (its
  // lanes post one at a time, on its thread): no allocation per post.
  ibv_send_wr* const wrs_;
  ibv_sge* const sges_;
  uint32_t chain_ = 0;
};

}  // namespace xferd::transport::verbs
