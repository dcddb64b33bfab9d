#include "daemon/memory/landed_events.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace xferd::memory {

bool LandedEventHub::Subscribe(LandedWatcher* watcher, Cursor* cursor) {
  MutexLock lock(&mu_);
  if (closed_) return false;
  if (ring_.empty()) ring_.resize(kCapacity);
  watchers_.push_back(watcher);
  watcher_count_.store(watchers_.size(), std::memory_order_release);
  *cursor = sequence_;
  return true;
}

void LandedEventHub::Unsubscribe(LandedWatcher* watcher) {
  MutexLock lock(&mu_);
  watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), watcher), watchers_.end());
  watcher_count_.store(watchers_.size(), std::memory_order_release);
}

void LandedEventHub::Publish(const LandedEvent& event) {
  MutexLock lock(&mu_);
  if (closed_) return;
  const uint64_t sequence = ++sequence_;
  if (ring_.empty()) {
    // Nobody watches: staged ranges of this transfer are no longer needed.
    if (!staged_.empty()) {
      LandedEvent unseen;
      unseen.source_node = event.source_node;
      unseen.source_transfer_id = event.source_transfer_id;
      AttachRanges(&unseen);
    }
    return;
  }
  LandedEvent& slot = ring_[sequence % kCapacity];
  if (slot.ranges != nullptr) range_bytes_ -= slot.ranges->bytes();
  slot = event;
  slot.sequence = sequence;
  if (keep_ranges_ && slot.blocks > 1) {
    if (slot.ranges == nullptr && !slot.read) AttachRanges(&slot);
    if (slot.ranges != nullptr) range_bytes_ += slot.ranges->bytes();
    slot.ranges_missing = slot.ranges == nullptr;
  } else {
    slot.ranges = nullptr;
  }
  for (LandedWatcher* watcher : watchers_) watcher->OnLandedNews();
}

void LandedEventHub::AttachRanges(LandedEvent* event) {
  auto it = staged_.find(StageKey(event->source_node, event->source_transfer_id));
  if (it == staged_.end()) return;
  range_bytes_ -= it->second->bytes();
  event->ranges = std::move(it->second);
  staged_.erase(it);
}

void LandedEventHub::KeepRanges() {
  MutexLock lock(&mu_);
  keep_ranges_ = true;
}

bool LandedEventHub::keeps_ranges() const {
  MutexLock lock(&mu_);
  return keep_ranges_;
}

absl::Status LandedEventHub::Stage(const std::string& source_node, uint64_t transfer_id,
                                   absl::string_view offsets, absl::string_view lengths,
                                   bool first) {
  if (offsets.size() != lengths.size() || offsets.size() % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ranges of ", offsets.size(), " offset bytes and ", lengths.size(),
        " length bytes: expected as many of each, 8 bytes (little-endian uint64) a range"));
  }
  MutexLock lock(&mu_);
  if (closed_ || !keep_ranges_) {
    return absl::FailedPreconditionError(
        closed_ ? "the region was deregistered"
                : "the region was not registered with landed_ranges: it keeps no ranges");
  }
  StageKey key(source_node, transfer_id);
  auto it = staged_.find(key);
  if (first && it != staged_.end()) {  // a stale list of the same id (a restarted writer)
    range_bytes_ -= it->second->bytes();
    staged_.erase(it);
    it = staged_.end();
  }
  const size_t held = it == staged_.end() ? 0 : it->second->bytes();
  const size_t more = offsets.size() + lengths.size();
  if (held + more > kMaxRangeBytes) {
    if (it != staged_.end()) {
      range_bytes_ -= held;
      staged_.erase(it);
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        held + more, " bytes of ranges exceed the bound of ", kMaxRangeBytes, " per region"));
  }
  MakeRoom(more, &key);
  it = staged_.find(key);
  if (it == staged_.end()) {
    it = staged_.emplace(key, std::make_shared<LandedRanges>()).first;
    stage_order_.push_back(std::move(key));
  }
  it->second->offsets.append(offsets.data(), offsets.size());
  it->second->lengths.append(lengths.data(), lengths.size());
  range_bytes_ += more;
  // Keys of ranges that landed stay in the order until met: compact it
  // when they outnumber the staged ones, so it stays bounded (amortised).
  if (stage_order_.size() > 2 * staged_.size() + 64) {
    std::deque<StageKey> live;
    for (StageKey& k : stage_order_) {
      if (staged_.contains(k)) live.push_back(std::move(k));
    }
    stage_order_.swap(live);
  }
  return absl::OkStatus();
}

void LandedEventHub::MakeRoom(size_t more, const StageKey* keep) {
  while (range_bytes_ + more > kMaxRangeBytes && !stage_order_.empty()) {
    auto it = staged_.find(stage_order_.front());
    if (it != staged_.end() && it->first == *keep) {
      // The list being added to is the newest; rotate it to the back.
      stage_order_.push_back(stage_order_.front());
      stage_order_.pop_front();
      if (staged_.size() == 1) break;
      continue;
    }
    stage_order_.pop_front();
    if (it == staged_.end()) continue;  // it landed since
    range_bytes_ -= it->second->bytes();
    staged_.erase(it);
  }
  if (range_bytes_ + more <= kMaxRangeBytes || ring_.empty()) return;
  const uint64_t oldest = sequence_ >= kCapacity ? sequence_ - kCapacity + 1 : 1;
  for (uint64_t s = oldest; s <= sequence_ && range_bytes_ + more > kMaxRangeBytes; ++s) {
    LandedEvent& event = ring_[s % kCapacity];
    if (event.ranges == nullptr) continue;
    range_bytes_ -= event.ranges->bytes();
    event.ranges = nullptr;
    event.ranges_missing = true;
  }
}

size_t LandedEventHub::range_bytes() const {
  MutexLock lock(&mu_);
  return range_bytes_;
}

LandedEventHub::ReadResult LandedEventHub::Read(Cursor* cursor, LandedEvent* event,
                                                uint64_t* dropped) const {
  MutexLock lock(&mu_);
  if (*cursor >= sequence_) return closed_ ? ReadResult::kEnd : ReadResult::kNone;
  // The oldest event still in the ring; those before it were overwritten.
  const uint64_t oldest = sequence_ >= kCapacity ? sequence_ - kCapacity + 1 : 1;
  const uint64_t next = std::max(*cursor + 1, oldest);
  *dropped = next - (*cursor + 1);
  *event = ring_[next % kCapacity];
  *cursor = next;
  return ReadResult::kEvent;
}

void LandedEventHub::Close() {
  MutexLock lock(&mu_);
  if (closed_) return;
  closed_ = true;
  for (auto& [key, ranges] : staged_) range_bytes_ -= ranges->bytes();
  staged_.clear();
  stage_order_.clear();
  for (LandedWatcher* watcher : watchers_) watcher->OnLandedNews();
}

uint64_t LandedEventHub::published() const {
  MutexLock lock(&mu_);
  return sequence_;
}

}  // namespace xferd::memory
