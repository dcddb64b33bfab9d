#include "daemon/memory/landed_events.h"

#include <algorithm>

namespace xferd::memory {

bool LandedEventHub::Subscribe(LandedWatcher* watcher) {
  MutexLock lock(&mu_);
  if (closed_) return false;
  watchers_.push_back(watcher);
  return true;
}

void LandedEventHub::Unsubscribe(LandedWatcher* watcher) {
  MutexLock lock(&mu_);
  watchers_.erase(std::remove(watchers_.begin(), watchers_.end(), watcher), watchers_.end());
}

void LandedEventHub::Publish(LandedEvent event) {
  MutexLock lock(&mu_);
  if (closed_) return;
  event.sequence = ++sequence_;
  for (LandedWatcher* watcher : watchers_) watcher->OnLanded(event);
}

void LandedEventHub::Close() {
  MutexLock lock(&mu_);
  if (closed_) return;
  closed_ = true;
  for (LandedWatcher* watcher : watchers_) watcher->OnRegionClosed();
  watchers_.clear();
}

uint64_t LandedEventHub::published() const {
  MutexLock lock(&mu_);
  return sequence_;
}

}  // namespace xferd::memory
