// A poller thread: drives one TransportWorker (its lanes to every peer) and
// the transfers handed to it. It claims ops, posts them in batches while
// its lanes have credits, and turns completions into transfer progress.
// It is where priorities apply (docs/priorities.md): critical transfers are
// served first on every pass (short of a lane's last credit); the other
// classes take turns by how many bytes they have posted per unit of weight,
// and post to a lane only while it holds less than PollerOptions::lane_bytes
// (critical ops' bytes included; one op of theirs at least). Within a class,
// tenants share by weight (TenantShares), and a tenant over its bandwidth
// waits (docs/tenants.md).
// Idle pollers spin for a short while, then sleep on the worker's fd and their
// inbox's, so an idle daemon uses no CPU.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "daemon/common/unique_fd.h"
#include "daemon/common/wake_inbox.h"
#include "daemon/engine/notes.h"
#include "daemon/engine/poll_source.h"
#include "daemon/engine/priority.h"
#include "daemon/engine/tenant_shares.h"
#include "daemon/engine/transfer.h"
#include "daemon/transport/transport.h"

namespace xferd::engine {

class PollerPool;

struct PollerOptions {
  // Busy-poll at least this long after the last work before sleeping, and
  // up to `spin_max` while sleeps are short (see SpinWindow).
  absl::Duration spin = absl::Microseconds(50);
  absl::Duration spin_max = absl::Microseconds(200);
  // The thread's slice under the fair scheduler (SetThreadSlice); 0: the
  // kernel's default.
  absl::Duration slice;
  // Upper bound on transfers a poller holds (the engine's in-flight limit):
  // its queues are sized once so the data path never allocates.
  uint32_t max_transfers = 4096;
  // By PriorityIndex; the critical class's is unused (it goes first).
  std::array<uint32_t, kPriorities> weights = {1, 8, 2, 1};
  // Below critical, an op is posted only to a lane holding less than this
  // (or than two of its transfer's slices, if larger), counting every op
  // this poller posted there and has not seen complete, critical ones too;
  // but each lane may always hold one op from below critical.
  uint64_t lane_bytes = 2 << 20;
  // The daemon's tenants (Tenants::all()): within a class, they share the
  // lanes by their weights (TenantShares).
  uint32_t tenants = 1;
};

struct PollerStats {
  uint64_t sleeps = 0;
  absl::Duration asleep;  // total time spent sleeping
  bool sleeping = false;
  uint32_t active_transfers = 0;
  absl::Duration spin;  // how long it now spins before it sleeps
};

// Transfers handed to a poller; sized to PollerOptions::max_transfers.
using TransferInbox = WakeInbox<std::shared_ptr<Transfer>>;

// A source to attach to a poller, or (`attach` false) to detach.
struct SourceCommand {
  bool attach = true;
  std::shared_ptr<PollSource> source;
};
using SourceInbox = WakeInbox<SourceCommand>;

class Poller final : public transport::CompletionSink {
 public:
  // `notes` takes what this poller only takes note of; it outlives it.
  // `sources` and `sources_epoll` (an epoll set) serve the poll sources.
  Poller(uint32_t index, transport::TransportWorker& worker, const PollerOptions& options,
         PollerPool& pool, std::unique_ptr<TransferInbox> inbox, Notes& notes,
         std::unique_ptr<SourceInbox> sources, UniqueFd sources_epoll);
  ~Poller() override;

  // Starts the thread, pinned to the worker's preferred CPUs if it names
  // any (a failure to pin is logged, not fatal).
  void Start();
  // The CPUs the thread may run on as the kernel reports them once pinned;
  // empty when it was not pinned. Valid after Start.
  const std::vector<uint32_t>& cpus() const { return cpus_; }
  // Joins the thread. Transfers still held are dropped (the engine has ended
  // them before).
  void Stop();

  // Any thread: serve this transfer until its ops for this poller are
  // posted (and, on a write's home poller, until its final op is).
  void Submit(std::shared_ptr<Transfer> transfer);
  // Any thread: there is work for this poller (a transfer whose bulk slices
  // were all acknowledged elsewhere): wake the thread if it sleeps, and keep
  // it from falling asleep before its next pass.
  void Wake();
  // Any thread: serve `source` on every pass from now on, or no more. The
  // poller holds the source until it has taken it off.
  void Attach(std::shared_ptr<PollSource> source);
  void Detach(std::shared_ptr<PollSource> source);
  // Sources attached and not detached (for stats, balancing). Any thread.
  uint32_t sources() const { return source_count_.load(std::memory_order_relaxed); }
  PollerStats stats() const;

  // Poller thread: a posted op ended; a peer's write landed (announced by
  // the notes thread).
  void OnOpDone(const transport::OpCompletion& completion) override;
  void OnLanded(transport::Landing landing) override { notes_.Landed(landing); }

 private:
  // On the poller's thread, before Run: options_.slice; poller 0 logs how
  // the kernel took it.
  void AskForSlice();
  void Run();
  uint32_t ServiceTransfers();
  // One class's transfers, tenant by tenant (TenantShares), round robin
  // within each; adds the bytes posted to `*bytes`.
  uint32_t ServiceClass(Priority priority, uint64_t* bytes);
  // Takes a transfer from the inbox into its class.
  void Take(std::shared_ptr<Transfer> transfer);
  // Takes attach / detach commands, then polls every source.
  uint32_t ServiceSources();
  // Posts what it can for `transfer` (see the top), within its tenant's
  // bandwidth; false once this poller is done with it.
  bool ServiceOne(Transfer& transfer, uint32_t* posted, uint64_t* bytes);
  // `lane` holds `bytes` of ops no more, of the critical class or not.
  void Release(const transport::Lane& lane, uint64_t bytes, bool critical);
  // Sleeps until there is work; how long it slept, or nullopt when work
  // came before it could fall asleep.
  std::optional<std::chrono::nanoseconds> Sleep();

  const uint32_t index_;
  transport::TransportWorker& worker_;
  const PollerOptions options_;
  PollerPool& pool_;
  // Submit() and Wake() go through it; a wake between a pass and Sleep()
  // makes Sleep() return at once (see WakeSignal).
  const std::unique_ptr<TransferInbox> inbox_;
  Notes& notes_;
  const std::unique_ptr<SourceInbox> source_inbox_;
  const UniqueFd sources_epoll_;  // every source's wake_fd
  std::atomic<bool> stop_{false};

  // Poller thread only. The transfers served, by class (PriorityIndex), each
  // with its round-robin start.
  std::array<std::vector<std::shared_ptr<Transfer>>, kPriorities> active_;
  std::array<size_t, kPriorities> next_start_{};
  // Below critical: bytes posted per unit of weight. The class with the
  // least goes first (virtual time, as in weighted fair queueing); a class
  // that comes back from idle starts at the least of the busy ones, so it
  // cannot bank the time it was idle.
  std::array<uint64_t, kPriorities> vtime_{};
  // Each class's share between tenants, and the transfers a pass let go.
  std::vector<TenantShares> tenant_shares_;
  std::vector<uint32_t> dropped_;
  // This pass's time (steady clock, ns; 0 until a capped tenant's transfer
  // needs it), and the earliest a transfer held back by its tenant's
  // bandwidth may post again (0: none held back): the poller sleeps no
  // longer than that.
  int64_t now_ns_ = 0;
  int64_t throttled_until_ns_ = 0;
  // Bytes of ops each lane holds: posted by this poller, not yet completed.
  // Only lanes holding some are in it.
  struct LaneHeld {
    uint64_t all = 0;
    uint64_t below_critical = 0;
  };
  absl::flat_hash_map<const transport::Lane*, LaneHeld> lane_bytes_;
  std::vector<std::shared_ptr<PollSource>> sources_;

  std::atomic<uint64_t> sleeps_{0};
  std::atomic<int64_t> asleep_ns_{0};
  std::atomic<int64_t> spin_ns_{0};
  std::atomic<uint32_t> active_count_{0};
  std::atomic<uint32_t> source_count_{0};
  std::vector<uint32_t> cpus_;  // written by Start only
  std::thread thread_;
};

// The engine's pollers; poller i drives transport worker i.
class PollerPool {
 public:
  // RESOURCE_EXHAUSTED if eventfds cannot be made.
  static absl::StatusOr<std::unique_ptr<PollerPool>> Create(transport::Transport& transport,
                                                            uint32_t count,
                                                            const PollerOptions& options,
                                                            Notes& notes);
  ~PollerPool();

  void Start();
  void Stop();
  uint32_t size() const { return static_cast<uint32_t>(pollers_.size()); }
  Poller& at(uint32_t index) { return *pollers_[index]; }
  // The index of the poller with the fewest sources (for a new one).
  uint32_t LeastSources() const;

 private:
  PollerPool() = default;
  std::vector<std::unique_ptr<Poller>> pollers_;
};

}  // namespace xferd::engine
