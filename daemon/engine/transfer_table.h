// All transfers this daemon started: admission against the in-flight limit,
// lookup by id, a bounded history of finished transfers, outcome counters.
// A transfer is kept whole while anything may still touch it (writes in
// flight, a poller or a reply holding it); after that only its final
// snapshot stays, so history never pins a region's memory. Admission and the
// counters are atomics: a poller that ends a transfer counts it without a
// lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "daemon/base/mutex.h"
#include "daemon/engine/priority.h"
#include "daemon/engine/tenants.h"
#include "daemon/engine/transfer.h"

namespace xferd::engine {

// One priority class's share of the counters below.
struct PriorityCounters {
  uint64_t submitted = 0;
  uint64_t done = 0;
  uint64_t failed = 0;
  uint64_t cancelled = 0;
  uint64_t refused = 0;
  uint64_t bytes = 0;  // payload bytes of ended transfers
  uint32_t in_flight = 0;
  // Transfers that were posted, and their summed wait from submission to
  // their first op on a lane.
  uint64_t started = 0;
  absl::Duration queue_wait;
};

// The totals are the sums of the classes' (by_priority).
struct TransferCounters {
  uint64_t submitted = 0;
  uint64_t done = 0;
  uint64_t failed = 0;
  uint64_t cancelled = 0;
  uint32_t in_flight = 0;
  std::map<std::string, uint64_t> errors;  // by status code name
  // Submissions refused before any transfer started, by status code name.
  std::map<std::string, uint64_t> refused;
  std::array<PriorityCounters, kPriorities> by_priority;  // by PriorityIndex
};

struct TransferFilter {
  bool include_finished = false;
  uint64_t batch_id = 0;  // 0: any
  uint32_t limit = 1000;
  uint64_t before_id = 0;  // only ids below this (paging); 0: any
  const Tenant* tenant = nullptr;  // only this tenant's; null: anyone's
};

// What the history's snapshots may hold of verified transfers' checksums
// in all (8 million blocks); beyond it the oldest snapshots lose theirs.
inline constexpr uint64_t kHistoryChecksumBytes = 64 << 20;

class TransferTable {
 public:
  // `critical_reserve` of the `max_in_flight` admit only critical transfers;
  // the history keeps `history` transfers, and their checksums up to
  // `checksum_budget` bytes.
  TransferTable(uint32_t max_in_flight, uint32_t critical_reserve, uint32_t history,
                uint64_t checksum_budget = kHistoryChecksumBytes);

  uint64_t NextId();
  uint64_t NextBatchId();

  // Reserves room for `plans`' transfers: below critical, up to the limit
  // less the critical reserve. RESOURCE_EXHAUSTED names the limit.
  absl::Status Admit(const std::vector<Transfer::Plan>& plans);
  // Adds an admitted transfer.
  void Insert(std::shared_ptr<Transfer> transfer);
  // `transfer` ended in `state` with `code`: counts it and frees its
  // admission. Called before the end is visible (OnTransferEnding), often
  // on a poller: lock-free.
  void Count(const Transfer& transfer, TransferState state, absl::StatusCode code);
  // A submission of class `priority` was refused with `error` (not OK):
  // counts it by code.
  void CountRefused(const absl::Status& error, Priority priority);
  // Moves an ended transfer into the history. Called once its end is
  // visible (by the notes thread): its snapshot may be taken from then on.
  // Returns how many finished transfers are still held whole (see Sweep).
  size_t Retire(uint64_t id);

  // The transfer while it is still kept whole (to watch or cancel it).
  std::shared_ptr<Transfer> FindLive(uint64_t id) const;
  // Its state, live or from history. nullopt if unknown or evicted.
  std::optional<TransferInfo> Lookup(uint64_t id) const;
  // Newest first.
  std::vector<TransferInfo> List(const TransferFilter& filter) const;
  // Transfers that have not ended yet.
  std::vector<std::shared_ptr<Transfer>> InFlight() const;
  // Reduces finished transfers nobody holds any more to their snapshot;
  // returns how many are still held (e.g. writes still completing).
  size_t Sweep();
  TransferCounters counters() const;

 private:
  struct Entry {
    std::shared_ptr<Transfer> live;  // null once reduced to `done`
    TransferInfo done;
  };
  void SweepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A verified transfer's snapshot `id` came into the history with its
  // checksums: counted, and the oldest ones' dropped beyond the budget.
  void KeepChecksumsLocked(uint64_t id, const TransferInfo& info)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TrimChecksumsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static TransferInfo InfoOf(const Entry& entry);

  // Counts by absl::StatusCode (0..16).
  using CodeCounts = std::array<std::atomic<uint64_t>, 17>;
  static std::map<std::string, uint64_t> ByName(const CodeCounts& counts);

  // Per class, lock-free; the totals are their sums.
  struct PriorityAtomics {
    std::atomic<uint64_t> submitted{0};
    std::atomic<uint64_t> done{0};
    std::atomic<uint64_t> failed{0};
    std::atomic<uint64_t> cancelled{0};
    std::atomic<uint64_t> refused{0};
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint32_t> in_flight{0};
    std::atomic<uint64_t> started{0};
    std::atomic<int64_t> queue_wait_ns{0};
  };

  const uint32_t max_in_flight_;
  const uint32_t critical_reserve_;
  const uint32_t history_;
  const uint64_t checksum_budget_;

  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> next_batch_id_{1};
  std::atomic<uint32_t> admitted_{0};
  CodeCounts errors_{};
  CodeCounts refused_{};
  std::array<PriorityAtomics, kPriorities> by_priority_;

  mutable Mutex mu_;
  // Node-based: an Entry holds a whole TransferInfo, and ids come and go
  // at the transfer rate; rehashing moves pointers, not entries.
  absl::node_hash_map<uint64_t, Entry> by_id_ ABSL_GUARDED_BY(mu_);
  // Finished ids, oldest first, trimmed to history_.
  std::deque<uint64_t> finished_ ABSL_GUARDED_BY(mu_);
  // Finished ids whose Transfer is still kept whole.
  std::vector<uint64_t> unswept_ ABSL_GUARDED_BY(mu_);
  // The checksums the history's snapshots hold (8 bytes per block of each
  // verified transfer), and their ids, oldest first: history is bounded by
  // count, and a count of million-block transfers would be gigabytes.
  uint64_t checksum_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<uint64_t> with_checksums_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xferd::engine
