// "Data landed" events of one region, from the transport's pollers to the
// region's watchers (WatchRegion streams). Publishing copies the event into a
// bounded ring and tells the watchers there is news; it never waits for one.
// Each watcher reads the ring at its own pace from its own thread; one that
// falls a whole ring behind loses the oldest events and is told how many.
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
  // There is something new to read: events, or the region's end. Called on
  // the publishing thread (a poller) with the hub's lock held, so it must
  // only take note and return: no blocking, no call back into the hub.
  virtual void OnLandedNews() = 0;
};

class LandedEventHub {
 public:
  // Events kept for watchers that read late (per region, allocated when the
  // first watcher subscribes): a burst of more landings than this between
  // two reads of a watcher costs it the oldest ones.
  static constexpr uint64_t kCapacity = 1024;

  // Where a watcher is in the stream: the sequence of the last event it read.
  using Cursor = uint64_t;

  // Adds a watcher, which then reads the events published after this call
  // from *cursor. Returns false (and keeps nothing) if the region is already
  // gone. Any thread; the watcher stays the caller's.
  bool Subscribe(LandedWatcher* watcher, Cursor* cursor);
  // Removes a watcher; after it returns no callback runs on it. Any thread.
  void Unsubscribe(LandedWatcher* watcher);

  // A transfer has fully landed (a peer's write, or this daemon's read):
  // numbers a copy of `event`, keeps it and tells the watchers. The
  // publishing poller's only cost: once the ring has been used, no
  // allocation (the node id is copied into a string that keeps its
  // capacity). Any thread.
  void Publish(const LandedEvent& event);

  enum class ReadResult {
    kEvent,  // *event is the next event; *dropped were lost before it
    kNone,   // nothing new yet: wait for OnLandedNews
    kEnd,    // the region is gone and every event before that was read
  };
  // The next event after *cursor, which it advances. Watcher's thread.
  ReadResult Read(Cursor* cursor, LandedEvent* event, uint64_t* dropped) const;

  // Tells watchers the region is gone (they read kEnd after the events
  // before it) and refuses later subscriptions and events. Any thread.
  void Close();

  // Events published so far. Any thread.
  uint64_t published() const;

 private:
  mutable Mutex mu_;
  std::vector<LandedWatcher*> watchers_ ABSL_GUARDED_BY(mu_);
  // Event with sequence s is at ring_[s % kCapacity] while s > sequence_ -
  // kCapacity. Empty until someone subscribes: nobody reads before.
  std::vector<LandedEvent> ring_ ABSL_GUARDED_BY(mu_);
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace xferd::memory
