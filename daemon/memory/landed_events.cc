#include "daemon/memory/landed_events.h"

#include <algorithm>

namespace xferd::memory {

bool LandedEventHub::Subscribe(LandedWatcher* watcher, Cursor* cursor) {
  MutexLock lock(&mu_);
  if (closed_) return false;
  if (ring_.empty()) ring_.resize(kCapacity);
  watchers_.push_back(watcher);
  *cursor = sequence_;
  return true;
}

void LandedEventHub::Unsubscribe(LandedWatcher* watcher) {
  MutexLock lock(&mu_);
  watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), watcher), watchers_.end());
}

void LandedEventHub::Publish(const LandedEvent& event) {
  MutexLock lock(&mu_);
  if (closed_) return;
  const uint64_t sequence = ++sequence_;
  if (ring_.empty()) return;
  LandedEvent& slot = ring_[sequence % kCapacity];
  slot = event;
  slot.sequence = sequence;
  for (LandedWatcher* watcher : watchers_) watcher->OnLandedNews();
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
  for (LandedWatcher* watcher : watchers_) watcher->OnLandedNews();
}

uint64_t LandedEventHub::published() const {
  MutexLock lock(&mu_);
  return sequence_;
}

}  // namespace xferd::memory
