// WatchRegion's stream: "data landed" events of one region. Events arrive on
// poller threads (through the region's LandedEventHub) and are queued, bounded:
// a slow reader loses the oldest unsent events, and the next one it gets says
// how many.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "daemon/base/mutex.h"
#include "daemon/memory/region.h"
#include "xferd/v1/xferd.pb.h"

namespace xferd::service {

class RegionWatchReactor final : public grpc::ServerWriteReactor<v1::RegionEvent>,
                                 public memory::LandedWatcher {
 public:
  // Subscribes and sends the SUBSCRIBED event. Deletes itself in OnDone.
  explicit RegionWatchReactor(std::shared_ptr<memory::Region> region);

  void OnLanded(const memory::LandedEvent& event) override;
  void OnRegionClosed() override;

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void Push(v1::RegionEvent event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<memory::Region> region_;
  Mutex mu_;
  std::deque<v1::RegionEvent> queue_ ABSL_GUARDED_BY(mu_);
  v1::RegionEvent writing_event_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;    // region gone: finish after the queue
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() called
};

}  // namespace xferd::service
