// WatchRegion's stream: "data landed" events of one region. Pollers only
// publish into the region's LandedEventHub, which notifies this watch on the
// watch loop; the events are read from the hub, converted and written on the
// watch thread and on gRPC's threads. A slow reader never holds a poller up:
// it loses the oldest events, and the next one it gets says how many.
#pragma once

#include <memory>

#include "absl/base/thread_annotations.h"
#include "daemon/memory/region.h"
#include "daemon/service/watch_loop.h"
#include "daemon/service/watch_stream.h"
#include "xferd/v1/xferd.pb.h"

namespace xferd::service {

class RegionWatchReactor final : public WatchStream<v1::RegionEvent>, public memory::LandedWatcher {
 public:
  // Sends SUBSCRIBED and subscribes; `ranges`: landed events carry the
  // ranges of many-block transfers. Deletes itself in OnDone.
  RegionWatchReactor(std::shared_ptr<memory::Region> region, WatchLoop& loop,
                     bool ranges = false);

  // Poller, hub locked: wakes the watch thread.
  void OnLandedNews() override;
  // Watch thread.
  absl::Time Run(absl::Time now) override;

 private:
  void OnWrittenLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnStreamDone() override;
  // Writes the next event, or DEREGISTERED at the end, if idle.
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<memory::Region> region_;
  const bool ranges_;
  bool subscribed_ ABSL_GUARDED_BY(mu_) = false;
  memory::LandedEventHub::Cursor cursor_ ABSL_GUARDED_BY(mu_) = 0;
  memory::LandedEvent event_ ABSL_GUARDED_BY(mu_);  // read buffer, reused
};

}  // namespace xferd::service
