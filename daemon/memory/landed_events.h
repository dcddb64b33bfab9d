// "Data landed" events of one region, from the transport's pollers to the
// region's watchers (WatchRegion streams). Publishing copies the event into a
// bounded ring and tells the watchers there is news; it never waits for one.
// Each watcher reads the ring at its own pace from its own thread; one that
// falls a whole ring behind loses the oldest events and is told how many.
// Regions with landed_ranges also hold the ranges writers stage ahead of
// their data, bounded, until the landing they belong to takes them.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"

namespace xferd::memory {

// The byte ranges a many-block transfer landed in, as packed little-endian
// uint64 arrays (the wire form of RegionEvent), for regions registered with
// landed_ranges. Shared, immutable: events and watchers copy the pointer.
struct LandedRanges {
  std::string offsets;
  std::string lengths;
  size_t bytes() const { return offsets.size() + lengths.size(); }
};

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
  // Regions with landed_ranges: the ranges of a many-block transfer, or
  // null with ranges_missing set when they were dropped or never arrived
  // (see docs/many-blocks.md).
  std::shared_ptr<const LandedRanges> ranges;
  bool ranges_missing = false;
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
  // Whether a watcher is subscribed now. Any thread, lock-free.
  bool watched() const { return watcher_count_.load(std::memory_order_acquire) > 0; }

  // Ranges held at most (staged and in the ring together): one request of
  // the maximum 4,194,304 blocks, 16 bytes a range.
  static constexpr size_t kMaxRangeBytes = size_t{64} << 20;

  // Makes the hub attach ranges to many-block events (the region was
  // registered with landed_ranges). Before any Publish; once.
  void KeepRanges();
  bool keeps_ranges() const;
  // Holds ranges (packed uint64 offsets and lengths, as many of each) of
  // `source_node`'s transfer `transfer_id` until its landed event is
  // published, which takes them. `first` starts the transfer's list (a stale
  // one of the same id is replaced); otherwise they are appended (ranges
  // come in chunks that fit a gRPC message). Over kMaxRangeBytes, the oldest
  // staged ranges, then the oldest events' ranges, are dropped.
  // Errors: FAILED_PRECONDITION (region without landed_ranges, or gone),
  // INVALID_ARGUMENT (arrays of unequal or partial length),
  // RESOURCE_EXHAUSTED (one transfer's ranges over kMaxRangeBytes: dropped).
  // Any thread.
  absl::Status Stage(const std::string& source_node, uint64_t transfer_id,
                     absl::string_view offsets, absl::string_view lengths, bool first);
  // Ranges held now (staged and in the ring), for tests and stats. Any thread.
  size_t range_bytes() const;

 private:
  using StageKey = std::pair<std::string, uint64_t>;
  // Drops held ranges, oldest first (but not `keep`'s, being added to),
  // until `more` bytes fit the bound.
  void MakeRoom(size_t more, const StageKey* keep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ranges an event of a many-block transfer gets (or it is missing).
  void AttachRanges(LandedEvent* event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  std::vector<LandedWatcher*> watchers_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> watcher_count_{0};  // watchers_.size(), for watched()
  // Event with sequence s is at ring_[s % kCapacity] while s > sequence_ -
  // kCapacity. Empty until someone subscribes: nobody reads before.
  std::vector<LandedEvent> ring_ ABSL_GUARDED_BY(mu_);
  uint64_t sequence_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool keep_ranges_ ABSL_GUARDED_BY(mu_) = false;
  // Staged ranges by (source node, transfer id), and their keys in staging
  // order (entries already taken are skipped when met).
  // Mutable while chunks arrive; events get them as const.
  absl::flat_hash_map<StageKey, std::shared_ptr<LandedRanges>> staged_ ABSL_GUARDED_BY(mu_);
  std::deque<StageKey> stage_order_ ABSL_GUARDED_BY(mu_);
  size_t range_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace xferd::memory
