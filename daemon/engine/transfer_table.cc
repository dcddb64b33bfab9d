#include "daemon/engine/transfer_table.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace xferd::engine {

TransferTable::TransferTable(uint32_t max_in_flight, uint32_t history)
    : max_in_flight_(max_in_flight), history_(history) {}

uint64_t TransferTable::NextId() {
  absl::MutexLock lock(&mu_);
  return next_id_++;
}

uint64_t TransferTable::NextBatchId() {
  absl::MutexLock lock(&mu_);
  return next_batch_id_++;
}

absl::Status TransferTable::Admit(uint32_t n) {
  absl::MutexLock lock(&mu_);
  if (admitted_ + n > max_in_flight_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many transfers in flight (", admitted_, " of engine.max_inflight_transfers=",
        max_in_flight_, "; this request adds ", n, "): wait for some to finish and retry"));
  }
  admitted_ += n;
  return absl::OkStatus();
}

void TransferTable::Unadmit(uint32_t n) {
  absl::MutexLock lock(&mu_);
  admitted_ -= n;
}

void TransferTable::Insert(std::shared_ptr<Transfer> transfer) {
  absl::MutexLock lock(&mu_);
  ++counters_.submitted;
  by_id_[transfer->id()] = std::move(transfer);
}

void TransferTable::OnFinished(const Transfer& transfer) {
  const TransferInfo info = transfer.Info();
  absl::MutexLock lock(&mu_);
  --admitted_;
  switch (info.state) {
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
  if (!info.error.ok()) ++counters_.errors[absl::StatusCodeToString(info.error.code())];
  finished_.push_back(info.id);
  EvictLocked();
}

// Drops the oldest finished transfers beyond the history size; one whose
// writes are still completing (in_flight > 0) waits for a later call.
void TransferTable::EvictLocked() {
  while (finished_.size() > history_) {
    auto it = by_id_.find(finished_.front());
    if (it != by_id_.end()) {
      if (it->second->in_flight() > 0) return;
      by_id_.erase(it);
    }
    finished_.pop_front();
  }
}

std::shared_ptr<Transfer> TransferTable::Find(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Transfer>> TransferTable::List(const TransferFilter& filter) const {
  std::vector<std::shared_ptr<Transfer>> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, t] : by_id_) {
      if (filter.batch_id != 0 && t->plan().batch_id != filter.batch_id) continue;
      if (!filter.include_finished && IsTerminal(t->state())) continue;
      out.push_back(t);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->id() > b->id(); });
  if (filter.limit > 0 && out.size() > filter.limit) out.resize(filter.limit);
  return out;
}

std::vector<std::shared_ptr<Transfer>> TransferTable::InFlight() const {
  return List(TransferFilter{false, 0, 0});
}

TransferCounters TransferTable::counters() const {
  absl::MutexLock lock(&mu_);
  TransferCounters c = counters_;
  c.in_flight = admitted_;
  return c;
}

}  // namespace xferd::engine
