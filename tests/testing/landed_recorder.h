// A test's watcher of one region's landed events: subscribes on construction,
// unsubscribes on destruction, and reads the events published in between the
// way a WatchRegion stream does (from the hub's ring, on the test's thread);
// and an event's ranges unpacked.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "daemon/memory/landed_events.h"
#include "daemon/memory/region.h"

namespace xferd::testing {

// A landed event's ranges as (offset, length) pairs, from their packed
// little-endian arrays.
using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;
Ranges UnpackRanges(const memory::LandedRanges& ranges);

class LandedRecorder final : public memory::LandedWatcher {
 public:
  // Aborts if the region is already deregistered (a broken test).
  explicit LandedRecorder(memory::Region& region);
  ~LandedRecorder() override;

  // Poller thread: counts the notification.
  void OnLandedNews() override { news.fetch_add(1); }
  // Test thread: the events published since the last call, in order. Fails
  // the test (gtest) if any were dropped before it read them.
  std::vector<memory::LandedEvent> Take();

  std::atomic<int> news{0};  // notifications so far

 private:
  memory::LandedEventHub& hub_;
  memory::LandedEventHub::Cursor cursor_ = 0;
};

}  // namespace xferd::testing
