#include "daemon/engine/transfer_table.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"

namespace xferd::engine {

TransferTable::TransferTable(uint32_t max_in_flight, uint32_t critical_reserve, uint32_t history,
                             uint64_t checksum_budget)
    : max_in_flight_(max_in_flight),
      // Validate() keeps the reserve below the limit; so does an engine
      // configured in code.
      critical_reserve_(std::min(critical_reserve, max_in_flight > 0 ? max_in_flight - 1 : 0)),
      history_(history),
      checksum_budget_(checksum_budget) {}

uint64_t TransferTable::NextId() { return next_id_.fetch_add(1, std::memory_order_relaxed); }

uint64_t TransferTable::NextBatchId() {
  return next_batch_id_.fetch_add(1, std::memory_order_relaxed);
}

absl::Status TransferTable::Admit(const std::vector<Transfer::Plan>& plans) {
  const uint32_t n = static_cast<uint32_t>(plans.size());
  const bool all_critical = std::all_of(plans.begin(), plans.end(), [](const Transfer::Plan& p) {
    return p.spec.priority == Priority::kCritical;
  });
  const uint32_t limit = all_critical ? max_in_flight_ : max_in_flight_ - critical_reserve_;
  // One submission is one caller's: one tenant, whose share comes first.
  const Tenant* tenant = plans.empty() ? nullptr : plans.front().spec.tenant;
  if (tenant != nullptr) RETURN_IF_ERROR(tenant->Admit(n));
  uint32_t admitted = admitted_.load(std::memory_order_relaxed);
  do {
    if (admitted + n > limit) {
      if (tenant != nullptr) tenant->Unadmit(n);
      return absl::ResourceExhaustedError(
          all_critical
              ? absl::StrCat("too many transfers in flight (", admitted,
                             " of engine.max_inflight_transfers=", max_in_flight_,
                             "; this request adds ", n, "): wait for some to finish and retry")
              : absl::StrCat(
                    "too many transfers in flight (", admitted, " of ", limit,
                    " below critical priority: engine.max_inflight_transfers=", max_in_flight_,
                    " less priorities.critical_reserve=", critical_reserve_, "; this request adds ",
                    n, "): wait for some to finish and retry"));
    }
  } while (!admitted_.compare_exchange_weak(admitted, admitted + n, std::memory_order_relaxed));
  for (const Transfer::Plan& p : plans) {
    by_priority_[PriorityIndex(p.spec.priority)].in_flight.fetch_add(1, std::memory_order_relaxed);
  }
  return absl::OkStatus();
}

void TransferTable::Insert(std::shared_ptr<Transfer> transfer) {
  by_priority_[PriorityIndex(transfer->plan().spec.priority)].submitted.fetch_add(
      1, std::memory_order_relaxed);
  const uint64_t id = transfer->id();
  MutexLock lock(&mu_);
  by_id_[id] = Entry{std::move(transfer), {}};
}

void TransferTable::Count(const Transfer& transfer, TransferState state, absl::StatusCode code) {
  PriorityAtomics& p = by_priority_[PriorityIndex(transfer.plan().spec.priority)];
  (state == TransferState::kDone        ? p.done
   : state == TransferState::kCancelled ? p.cancelled
                                        : p.failed)
      .fetch_add(1, std::memory_order_relaxed);
  p.bytes.fetch_add(transfer.end_bytes(), std::memory_order_relaxed);
  std::optional<absl::Duration> queue_wait;
  if (const absl::Time started = transfer.started_at(); started != absl::InfinitePast()) {
    queue_wait = started - transfer.submitted_at();
    p.started.fetch_add(1, std::memory_order_relaxed);
    p.queue_wait_ns.fetch_add(absl::ToInt64Nanoseconds(*queue_wait), std::memory_order_relaxed);
  }
  p.in_flight.fetch_sub(1, std::memory_order_relaxed);
  if (const Tenant* tenant = transfer.plan().spec.tenant) {
    tenant->Release(transfer.end_bytes(), queue_wait);
  }
  const size_t index = static_cast<size_t>(code);
  if (code != absl::StatusCode::kOk && index < errors_.size()) {
    errors_[index].fetch_add(1, std::memory_order_relaxed);
  }
  // Last: a reader that sees the transfer out of flight also sees it counted.
  admitted_.fetch_sub(1, std::memory_order_release);
}

void TransferTable::CountRefused(const absl::Status& error, Priority priority) {
  by_priority_[PriorityIndex(priority)].refused.fetch_add(1, std::memory_order_relaxed);
  const size_t index = static_cast<size_t>(error.code());
  if (index < refused_.size()) refused_[index].fetch_add(1, std::memory_order_relaxed);
}

std::map<std::string, uint64_t> TransferTable::ByName(const CodeCounts& counts) {
  std::map<std::string, uint64_t> out;
  for (size_t i = 0; i < counts.size(); ++i) {
    const uint64_t n = counts[i].load(std::memory_order_relaxed);
    if (n > 0) out[absl::StatusCodeToString(static_cast<absl::StatusCode>(i))] = n;
  }
  return out;
}

size_t TransferTable::Retire(uint64_t id) {
  MutexLock lock(&mu_);
  finished_.push_back(id);
  unswept_.push_back(id);
  SweepLocked();
  EvictLocked();
  return unswept_.size();
}

// A finished transfer can shrink to its snapshot once no write of it is in
// flight (completions carry its address) and the table holds the only
// reference: nothing else can reach it then, and nothing new can, except
// through this table.
void TransferTable::SweepLocked() {
  for (size_t i = 0; i < unswept_.size();) {
    auto it = by_id_.find(unswept_[i]);
    if (it != by_id_.end() && it->second.live != nullptr) {
      const std::shared_ptr<Transfer>& t = it->second.live;
      if (t->in_flight() > 0 || t.use_count() > 1) {
        ++i;
        continue;
      }
      it->second.done = t->Info();
      it->second.live.reset();
      KeepChecksumsLocked(unswept_[i], it->second.done);
    }
    unswept_[i] = unswept_.back();
    unswept_.pop_back();
  }
}

size_t TransferTable::Sweep() {
  MutexLock lock(&mu_);
  SweepLocked();
  EvictLocked();
  return unswept_.size();
}

// Drops the oldest finished transfers beyond the history size. Only a
// transfer with writes still in flight must wait (their completions carry
// its address); anyone else holding it keeps it alive by their reference.
void TransferTable::EvictLocked() {
  while (finished_.size() > history_) {
    auto it = by_id_.find(finished_.front());
    if (it != by_id_.end()) {
      if (it->second.live != nullptr && it->second.live->in_flight() > 0) return;
      if (it->second.done.checksums != nullptr) {
        checksum_bytes_ -= it->second.done.checksums->size() * sizeof(uint64_t);
      }
      by_id_.erase(it);
    }
    finished_.pop_front();
  }
  TrimChecksumsLocked();
}

void TransferTable::KeepChecksumsLocked(uint64_t id, const TransferInfo& info) {
  if (info.checksums == nullptr) return;
  checksum_bytes_ += info.checksums->size() * sizeof(uint64_t);
  with_checksums_.push_back(id);
  TrimChecksumsLocked();
}

// Drops ids of snapshots evicted or without checksums from the front, and
// the oldest snapshots' checksums while over the budget.
void TransferTable::TrimChecksumsLocked() {
  while (!with_checksums_.empty()) {
    auto it = by_id_.find(with_checksums_.front());
    const bool held = it != by_id_.end() && it->second.done.checksums != nullptr;
    if (held && checksum_bytes_ <= checksum_budget_) return;
    if (held) {
      checksum_bytes_ -= it->second.done.checksums->size() * sizeof(uint64_t);
      it->second.done.checksums.reset();
    }
    with_checksums_.pop_front();
  }
}

TransferInfo TransferTable::InfoOf(const Entry& entry) {
  return entry.live != nullptr ? entry.live->Info() : entry.done;
}

std::shared_ptr<Transfer> TransferTable::FindLive(uint64_t id) const {
  MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second.live;
}

std::optional<TransferInfo> TransferTable::Lookup(uint64_t id) const {
  MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return std::nullopt;
  return InfoOf(it->second);
}

std::vector<TransferInfo> TransferTable::List(const TransferFilter& filter) const {
  MutexLock lock(&mu_);
  // Ids first, newest first, and snapshots of the chosen ones only: a page
  // of 1000 out of a long history copies 1000 snapshots, not all of them.
  std::vector<std::pair<uint64_t, const Entry*>> matches;
  for (const auto& [id, entry] : by_id_) {
    if (filter.before_id != 0 && id >= filter.before_id) continue;
    const bool live = entry.live != nullptr;
    const uint64_t batch = live ? entry.live->plan().batch_id : entry.done.batch_id;
    if (filter.batch_id != 0 && batch != filter.batch_id) continue;
    const Tenant* tenant = live ? entry.live->plan().spec.tenant : entry.done.spec.tenant;
    if (filter.tenant != nullptr && tenant != filter.tenant) continue;
    const bool finished = live ? IsTerminal(entry.live->state()) : true;
    if (!filter.include_finished && finished) continue;
    matches.emplace_back(id, &entry);
  }
  const size_t n = filter.limit > 0 ? std::min<size_t>(filter.limit, matches.size())
                                    : matches.size();
  std::partial_sort(matches.begin(), matches.begin() + n, matches.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<TransferInfo> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(InfoOf(*matches[i].second));
  return out;
}

std::vector<std::shared_ptr<Transfer>> TransferTable::InFlight() const {
  std::vector<std::shared_ptr<Transfer>> out;
  MutexLock lock(&mu_);
  for (const auto& [id, entry] : by_id_) {
    if (entry.live != nullptr && !IsTerminal(entry.live->state())) out.push_back(entry.live);
  }
  return out;
}

TransferCounters TransferTable::counters() const {
  TransferCounters c;
  c.in_flight = admitted_.load(std::memory_order_acquire);
  c.errors = ByName(errors_);
  c.refused = ByName(refused_);
  for (size_t i = 0; i < kPriorities; ++i) {
    const PriorityAtomics& a = by_priority_[i];
    PriorityCounters& p = c.by_priority[i];
    p.submitted = a.submitted.load(std::memory_order_relaxed);
    p.done = a.done.load(std::memory_order_relaxed);
    p.failed = a.failed.load(std::memory_order_relaxed);
    p.cancelled = a.cancelled.load(std::memory_order_relaxed);
    p.refused = a.refused.load(std::memory_order_relaxed);
    p.bytes = a.bytes.load(std::memory_order_relaxed);
    p.in_flight = a.in_flight.load(std::memory_order_relaxed);
    p.started = a.started.load(std::memory_order_relaxed);
    p.queue_wait = absl::Nanoseconds(a.queue_wait_ns.load(std::memory_order_relaxed));
    c.submitted += p.submitted;
    c.done += p.done;
    c.failed += p.failed;
    c.cancelled += p.cancelled;
  }
  return c;
}

}  // namespace xferd::engine
