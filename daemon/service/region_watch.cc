#include "daemon/service/region_watch.h"

#include "daemon/service/proto_convert.h"

namespace xferd::service {
namespace {

void SetEvent(v1::RegionEvent::Kind kind, const std::string& region, v1::RegionEvent* event) {
  event->Clear();
  event->set_kind(kind);
  event->set_region(region);
  ToProto(absl::Now(), event->mutable_time());
}

}  // namespace

RegionWatchReactor::RegionWatchReactor(std::shared_ptr<memory::Region> region, WatchLoop& loop,
                                       bool ranges)
    : region_(std::move(region)), ranges_(ranges) {
  // SUBSCRIBED goes first, so every landing after the subscription follows it.
  MutexLock lock(&mu_);
  SetEvent(v1::RegionEvent::KIND_SUBSCRIBED, region_->name(), &message_);
  WriteLocked(/*last=*/false);
  Attach(loop);
  // Not subscribed: the region is already gone, and PumpLocked says so.
  subscribed_ = region_->landed().Subscribe(this, &cursor_);
}

void RegionWatchReactor::OnLandedNews() { handle_->Notify(); }

absl::Time RegionWatchReactor::Run(absl::Time) {
  MutexLock lock(&mu_);
  PumpLocked();
  return absl::InfiniteFuture();  // runs again when the hub has news
}

void RegionWatchReactor::OnWrittenLocked() { PumpLocked(); }

void RegionWatchReactor::PumpLocked() {
  if (!IdleLocked()) return;
  uint64_t dropped = 0;
  const memory::LandedEventHub::ReadResult next =
      subscribed_ ? region_->landed().Read(&cursor_, &event_, &dropped)
                  : memory::LandedEventHub::ReadResult::kEnd;
  switch (next) {
    case memory::LandedEventHub::ReadResult::kNone:
      return;
    case memory::LandedEventHub::ReadResult::kEvent:
      message_.Clear();
      ToProto(event_, region_->name(), ranges_, &message_);
      message_.set_dropped(dropped);
      WriteLocked(/*last=*/false);
      return;
    case memory::LandedEventHub::ReadResult::kEnd:
      SetEvent(v1::RegionEvent::KIND_DEREGISTERED, region_->name(), &message_);
      WriteLocked(/*last=*/true);
      return;
  }
}

void RegionWatchReactor::OnStreamDone() {
  bool subscribed;
  {
    MutexLock lock(&mu_);
    subscribed = subscribed_;
  }
  // After Unsubscribe returns, no poller calls OnLandedNews on us.
  if (subscribed) region_->landed().Unsubscribe(this);
}

}  // namespace xferd::service
