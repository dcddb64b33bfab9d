#include "daemon/engine/transfer_table.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace xferd::engine {

TransferTable::TransferTable(uint32_t max_in_flight, uint32_t history)
    : max_in_flight_(max_in_flight), history_(history) {}

uint64_t TransferTable::NextId() {
  MutexLock lock(&mu_);
  return next_id_++;
}

uint64_t TransferTable::NextBatchId() {
  MutexLock lock(&mu_);
  return next_batch_id_++;
}

absl::Status TransferTable::Admit(uint32_t n) {
  MutexLock lock(&mu_);
  if (admitted_ + n > max_in_flight_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many transfers in flight (", admitted_, " of engine.max_inflight_transfers=",
        max_in_flight_, "; this request adds ", n, "): wait for some to finish and retry"));
  }
  admitted_ += n;
  return absl::OkStatus();
}

void TransferTable::Unadmit(uint32_t n) {
  MutexLock lock(&mu_);
  admitted_ -= n;
}

void TransferTable::Insert(std::shared_ptr<Transfer> transfer) {
  MutexLock lock(&mu_);
  ++counters_.submitted;
  const uint64_t id = transfer->id();
  by_id_[id] = Entry{std::move(transfer), {}};
}

void TransferTable::Count(const TransferInfo& outcome) {
  MutexLock lock(&mu_);
  --admitted_;
  switch (outcome.state) {
    case TransferState::kDone:
      ++counters_.done;
      break;
    case TransferState::kCancelled:
      ++counters_.cancelled;
      break;
    default:
      ++counters_.failed;
      break;
  }
  if (!outcome.error.ok()) ++counters_.errors[absl::StatusCodeToString(outcome.error.code())];
}

void TransferTable::CountRefused(const absl::Status& error) {
  MutexLock lock(&mu_);
  ++counters_.refused[absl::StatusCodeToString(error.code())];
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
      by_id_.erase(it);
    }
    finished_.pop_front();
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
  std::vector<TransferInfo> out;
  {
    MutexLock lock(&mu_);
    for (const auto& [id, entry] : by_id_) {
      const bool live = entry.live != nullptr;
      const uint64_t batch = live ? entry.live->plan().batch_id : entry.done.batch_id;
      if (filter.batch_id != 0 && batch != filter.batch_id) continue;
      const bool finished = live ? IsTerminal(entry.live->state()) : true;
      if (!filter.include_finished && finished) continue;
      out.push_back(InfoOf(entry));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id > b.id; });
  if (filter.limit > 0 && out.size() > filter.limit) out.resize(filter.limit);
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
  MutexLock lock(&mu_);
  TransferCounters c = counters_;
  c.in_flight = admitted_;
  return c;
}

}  // namespace xferd::engine
