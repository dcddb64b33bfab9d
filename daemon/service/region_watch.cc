#include "daemon/service/region_watch.h"

#include "daemon/service/proto_convert.h"

namespace xferd::service {
namespace {

// Events held for a slow reader; beyond it the oldest unsent one is dropped
// and counted on the event after it.
constexpr size_t kMaxQueuedEvents = 1024;
static_assert(kMaxQueuedEvents >= 2, "a dropped event's successor carries its count");

v1::RegionEvent Event(v1::RegionEvent::Kind kind, const std::string& region) {
  v1::RegionEvent event;
  event.set_kind(kind);
  event.set_region(region);
  ToProto(absl::Now(), event.mutable_time());
  return event;
}

}  // namespace

RegionWatchReactor::RegionWatchReactor(std::shared_ptr<memory::Region> region)
    : region_(std::move(region)) {
  // SUBSCRIBED is queued first, so every landing after it follows it. The hub
  // calls OnLanded with its own lock held, so subscribe without holding ours.
  {
    MutexLock lock(&mu_);
    Push(Event(v1::RegionEvent::KIND_SUBSCRIBED, region_->name()));
  }
  if (!region_->landed().Subscribe(this)) OnRegionClosed();
}

void RegionWatchReactor::OnLanded(const memory::LandedEvent& event) {
  MutexLock lock(&mu_);
  if (finished_) return;
  if (queue_.size() >= kMaxQueuedEvents) {
    // Drop the oldest unsent event, never this one: only a later event can
    // report a drop, so dropping the newest loses the end of a burst silently.
    const uint64_t missed = queue_.front().dropped() + 1;
    queue_.pop_front();
    queue_.front().set_dropped(queue_.front().dropped() + missed);
  }
  v1::RegionEvent e;
  ToProto(event, region_->name(), &e);
  Push(std::move(e));
}

void RegionWatchReactor::OnRegionClosed() {
  MutexLock lock(&mu_);
  closed_ = true;
  Push(Event(v1::RegionEvent::KIND_DEREGISTERED, region_->name()));
}

void RegionWatchReactor::Push(v1::RegionEvent event) {
  queue_.push_back(std::move(event));
  if (!writing_) WriteNextLocked();
}

void RegionWatchReactor::WriteNextLocked() {
  if (finished_) return;
  if (queue_.empty()) {
    if (closed_) FinishLocked(grpc::Status::OK);
    return;
  }
  writing_event_ = std::move(queue_.front());
  queue_.pop_front();
  writing_ = true;
  StartWrite(&writing_event_);
}

void RegionWatchReactor::OnWriteDone(bool ok) {
  MutexLock lock(&mu_);
  writing_ = false;
  if (!ok) {
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watcher went away"));
    return;
  }
  WriteNextLocked();
}

void RegionWatchReactor::OnCancel() {
  MutexLock lock(&mu_);
  FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
}

void RegionWatchReactor::FinishLocked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  Finish(status);
}

void RegionWatchReactor::OnDone() {
  // After Unsubscribe returns, no poller thread can call OnLanded on us.
  region_->landed().Unsubscribe(this);
  delete this;
}

}  // namespace xferd::service
