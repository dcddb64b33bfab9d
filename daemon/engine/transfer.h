// One transfer: a write of blocks of a local region into a peer's region, or a
// read of blocks of a peer's region into a local one, grouped into ops (a
// contiguous range is a run of slice-sized blocks, one per op). Immutable
// after submission except for the atomics the pollers advance and its
// terminal outcome, which is decided exactly once, in one atomic step (the
// first of done / error / cancel / deadline wins; the others return at
// once), and then announced: at once to a completion port (a read done:
// once its landed event is out), later to observers, from the engine's
// notes thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "daemon/base/mutex.h"
#include "daemon/engine/block_spec.h"
#include "daemon/engine/transfer_checksums.h"
#include "daemon/engine/transfer_listener.h"
#include "daemon/engine/transfer_spec.h"
#include "daemon/memory/region.h"
#include "daemon/transport/transport.h"

namespace xferd::engine {

class Peer;
struct CachedKey;

class Transfer {
 public:
  // Called once, on the engine's notes thread, after the end is visible.
  // Must not block.
  using Observer = std::function<void(const TransferInfo& info)>;

  struct Plan {
    uint64_t id = 0;
    uint64_t batch_id = 0;
    absl::Time submitted_at;  // the request's arrival; spec.timeout runs from it
    TransferSpec spec;
    transport::OpKind kind = transport::OpKind::kWrite;
    // Write: the source; read: the destination.
    std::shared_ptr<memory::Region> local;
    std::shared_ptr<Peer> peer;
    std::shared_ptr<transport::Link> link;
    // Write: the destination; read: the source; and the cache entry it
    // came from (marked gone when the peer no longer knows the region).
    transport::RemoteRegion remote;
    std::shared_ptr<const CachedKey> remote_key;
    // The blocks to move, each <= slice_size, adjacent ones already merged
    // (see block_plan.h). Moved into the transfer.
    std::vector<transport::Block> blocks;
    uint32_t slice_size = 0;
    uint32_t home_poller = 0;  // posts a write's final op
    uint32_t lanes = 1;        // pollers 0..lanes-1 serve it
    transport::TransportKind transport = transport::TransportKind::kTcp;
    // A many-block write into a region with landed_ranges: its ranges are
    // sent to the peer before its ops (docs/many-blocks.md).
    bool stage_ranges = false;
    // A verified read's expected checksums (TransferSpec), one per block.
    std::shared_ptr<const std::vector<uint64_t>> expected_checksums;
    // Verified, over a transport whose receiving CPU does not see the data
    // (verbs): the peer checksums its side once every op completed, and a
    // write's landing notice goes with that request, not its final op.
    bool verify_at_peer = false;
    // The request's completion port (TransferSpec::completion): held while
    // the transfer is, not by its history; and its poller, if it names one.
    std::shared_ptr<CompletionPort> completion;
    int32_t poller = -1;
  };

  Transfer(Plan plan, TransferListener* listener);
  ~Transfer();

  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;

  uint64_t id() const { return plan_.id; }
  const Plan& plan() const { return plan_; }
  // Ops the blocks are grouped into (TransferInfo.slices).
  uint32_t ops() const { return static_cast<uint32_t>(op_starts_.size() - 1); }
  uint64_t blocks() const { return blocks_.size(); }
  // The planned blocks (merged, cut at the slice size). Any thread.
  absl::Span<const transport::Block> planned_blocks() const { return blocks_; }
  uint64_t bytes() const { return bytes_; }
  absl::Time deadline() const { return deadline_; }
  TransferState state() const { return state_.load(std::memory_order_acquire); }

  // ---- data path (pollers) ----
  // A write's ops 0..ops-2 are "bulk", claimed by any serving poller; the
  // last is the final op, sent by the home poller once every bulk op is
  // acknowledged, so its landing notice is true for the whole transfer. A
  // read has no final op: every op is bulk, and the transfer is done (and
  // its landed event raised here) when the last one completes.
  bool has_final() const { return plan_.kind == transport::OpKind::kWrite; }
  uint32_t bulk_ops() const { return ops() - (has_final() ? 1 : 0); }
  uint32_t ClaimBulk() { return next_op_.fetch_add(1, std::memory_order_relaxed); }
  bool BulkClaimedOut() const { return next_op_.load(std::memory_order_relaxed) >= bulk_ops(); }
  // Returns the number of bulk ops completed, this one included.
  uint32_t OnBulkDone(uint32_t bytes);
  bool BulkComplete() const { return bulk_done_.load(std::memory_order_acquire) == bulk_ops(); }
  bool TryClaimFinal() { return !final_claimed_.exchange(true, std::memory_order_acq_rel); }
  void OnFinalDone(uint32_t bytes);
  // A read's last op completed: ends the transfer done, raising the landed
  // event on the local region, unless it already ended (then no event).
  void OnReadDone();
  // Fills the op for op `index` (the final op of a write when `final`).
  void MakeOp(uint32_t index, bool final, transport::DataOp* op);
  // ---- verification (docs/integrity.md) ----
  // Verified only (else null): the source's checksums, one per planned
  // block, and what the destination found. A mismatch is recorded before
  // its op is counted done (OnBulkDone, OnFinalDone), so whoever sees every
  // bulk op done also sees it.
  TransferChecksums* checksums() const { return checksums_.get(); }
  bool corrupt() const { return checksums_ != nullptr && checksums_->corrupt(); }
  // What the receiver of a write announces once all of it landed.
  const transport::LandingNotice& notice() const { return notice_; }
  // Every bulk op completed and some differed: ends the transfer DATA_LOSS
  // (a write's final op, and with it the landing notice, never goes).
  // Returns whether it did.
  bool FailIfCorrupt();
  // Ends a verified transfer whose ops all completed: done, or DATA_LOSS
  // when its blocks differ from their checksums or the expected ones.
  void FinishVerified();
  // Writes posted and not yet completed. The transfer object must outlive
  // them: the table keeps it until this is 0.
  void AddInFlight(uint32_t n) { in_flight_.fetch_add(n, std::memory_order_relaxed); }
  void RemoveInFlight() { in_flight_.fetch_sub(1, std::memory_order_release); }
  uint32_t in_flight() const { return in_flight_.load(std::memory_order_acquire); }
  // QUEUED -> RUNNING on the first post, which it times (started_at).
  void MarkRunning();
  // Which pollers hold the transfer among those they work on (bit i: poller
  // i, of at most 64). A poller lets go of an ended transfer on its next
  // pass, so whoever ends it wakes the holders (one may sleep, its lane
  // silent): otherwise the transfer, and with it its region's memory,
  // would stay until that poller's next work. Sequentially consistent with
  // the end: a poller that takes it after the holders were read sees the
  // end in that same pass.
  void HeldBy(uint32_t poller) { holders_.fetch_or(uint64_t{1} << poller); }
  void ReleasedBy(uint32_t poller) { holders_.fetch_and(~(uint64_t{1} << poller)); }
  uint64_t holders() const {
    std::atomic_thread_fence(std::memory_order_seq_cst);  // after the end's store
    return holders_.load();
  }

  // ---- outcome (any thread) ----
  // Ends the transfer unless it already ended, in one atomic step; returns
  // whether this call did. The winner makes the end visible before it
  // returns; a loser returns at once (AwaitEnd waits for the winner). A
  // failure the transport could not explain goes to the listener first
  // (ExplainFailure), which ends the transfer later with what it found.
  bool Finish(TransferState terminal, absl::Status error);
  // Control threads: returns once the end is visible (a Finish that lost a
  // race makes its caller wait here, never a poller).
  void AwaitEnd() const;
  // Registers an observer of the end; returns false (and does not keep it)
  // if the end is already visible.
  bool AddObserver(Observer observer);
  // Lock-free: the live state, or the final one once visible.
  TransferInfo Info() const;
  // Once the end is visible, lock-free, without a copy (what a completion
  // port reads on a poller): its error, bytes done, end time.
  const absl::Status& end_error() const { return error_; }
  uint64_t end_bytes() const { return final_bytes_; }
  absl::Time finished_at() const { return finished_at_; }
  absl::Time submitted_at() const { return submitted_at_; }
  // When its first op was posted; InfinitePast before. Any thread.
  absl::Time started_at() const;
  // The engine's notes thread, once per transfer after the end is visible:
  // a read done raises its landed event on its local region, then the
  // observers hear of `outcome` (its Info()).
  void Announce(const TransferInfo& outcome);
  // Whether Announce ran: the end is then in the history, the metrics and
  // (a read's) the region's landed events. Any thread.
  bool announced() const { return announced_.load(std::memory_order_acquire); }
  // Whether someone waits for Announce: an observer, or (a read) its landed
  // event and completion port. Otherwise only bookkeeping does, which the
  // notes thread may take up a little later (Notes). Any thread.
  bool announce_awaited() const {
    return plan_.kind == transport::OpKind::kRead ||
           observed_.load(std::memory_order_acquire);
  }

 private:
  // The part of Info() fixed at submission.
  TransferInfo Describe() const;
  // A read's landed event on its local region.
  void PublishReadLanded();
  // Every op completed: verified at the peer first (the listener), or
  // ended now.
  void Conclude();

  // blocks_[op_starts_[i] .. op_starts_[i+1]) make op i: with the blocks
  // that is at most 24 + 4 bytes per block, freed with the transfer. Taken
  // from the plan before plan_ is built, hence declared first.
  const std::vector<transport::Block> blocks_;
  const std::vector<uint32_t> op_starts_;
  const uint64_t bytes_;
  const Plan plan_;  // its `blocks` is empty (moved to blocks_)
  const absl::Time submitted_at_;
  const absl::Time deadline_;
  const transport::LandingNotice notice_;
  TransferListener* const listener_;
  // Verified: the source's checksums and what the destination found
  // (transfer_checksums.h); null otherwise.
  const std::unique_ptr<TransferChecksums> checksums_;

  std::atomic<TransferState> state_{TransferState::kQueued};
  std::atomic<uint32_t> next_op_{0};
  std::atomic<uint32_t> bulk_done_{0};
  std::atomic<bool> final_claimed_{false};
  std::atomic<uint64_t> bytes_done_{0};
  std::atomic<uint32_t> in_flight_{0};
  std::atomic<bool> explaining_{false};  // a failure is being looked into
  std::atomic<uint64_t> holders_{0};      // pollers holding it (HeldBy)
  std::atomic<int64_t> started_ns_{0};    // unix ns of the first post; 0: none

  // The one atomic step that decides the end. The outcome below is written
  // by that Finish alone, before state_ turns terminal (release), and read
  // only after seeing it terminal (acquire): no lock.
  std::atomic<bool> ending_{false};
  absl::Status error_;
  absl::Time finished_at_ = absl::InfinitePast();
  uint64_t final_bytes_ = 0;

  std::atomic<bool> announced_{false};
  std::atomic<bool> observed_{false};  // an observer was ever added
  // Observers: registered by control threads, taken by the notes thread.
  mutable Mutex observers_mu_;
  std::vector<Observer> observers_ ABSL_GUARDED_BY(observers_mu_);
};

// The cookie of an op: the transfer's address, with the low bit set on a
// write's final op (Transfer objects are at least 8-byte aligned).
inline uint64_t MakeCookie(const Transfer* t, bool final) {
  return reinterpret_cast<uint64_t>(t) | (final ? 1u : 0u);
}
inline Transfer* CookieTransfer(uint64_t cookie) {
  return reinterpret_cast<Transfer*>(cookie & ~uint64_t{1});
}
inline bool CookieIsFinal(uint64_t cookie) { return (cookie & 1) != 0; }

}  // namespace xferd::engine
