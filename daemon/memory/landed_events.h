// Fan-out of "data landed" events of one region to its watchers. A transport's
// poller publishes when a peer's transfer has fully landed; the gRPC
// WatchRegion streams subscribe. Watchers must not block in their callbacks:
// they queue the event and return.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"

namespace xferd::memory {

struct LandedEvent {
  uint64_t offset = 0;
  uint64_t length = 0;
  std::string source_node;
  uint64_t source_transfer_id = 0;
  uint64_t sequence = 0;  // set by the hub: 1, 2, ... per region
  absl::Time time;
  // Blocks and payload bytes of the transfer; offset/length span its lowest
  // to highest byte. 0 blocks means a transfer that did not say (1 block).
  uint64_t blocks = 0;
  uint64_t bytes = 0;
  // True when this daemon read the data from source_node (a Read).
  bool read = false;
};

class LandedWatcher {
 public:
  virtual ~LandedWatcher() = default;
  // Called with the hub's lock held, on the publishing (poller) thread.
  virtual void OnLanded(const LandedEvent& event) = 0;
  // The region was deregistered; no further events. Called at most once.
  virtual void OnRegionClosed() = 0;
};

class LandedEventHub {
 public:
  // Adds a watcher; returns false if the hub is already closed (the caller
  // then reports the region as gone). Thread-safe.
  bool Subscribe(LandedWatcher* watcher);
  // Removes a watcher; after it returns no callback runs on it. Thread-safe.
  void Unsubscribe(LandedWatcher* watcher);
  // Assigns the sequence number and notifies every watcher. Thread-safe.
  void Publish(LandedEvent event);
  // Tells watchers the region is gone and refuses later subscriptions.
  void Close();

  uint64_t published() const;

 private:
  mutable Mutex mu_;
  std::vector<LandedWatcher*> watchers_ ABSL_GUARDED_BY(mu_);
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace xferd::memory
