#include "client/cpp/region_watch.h"

#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "daemon/base/mutex.h"
#include "client/cpp/xferd_client.h"

namespace xferd::client {
namespace {

// Events buffered for an owner that does not call Next; beyond it the reactor
// stops reading and gRPC flow control pushes back to the daemon, which keeps
// its own bounded queue and reports what it dropped in RegionEvent.dropped.
constexpr size_t kMaxBuffered = 1024;

}  // namespace

// Reads continuously until the buffer is full. A hold (AddHold) keeps OnDone
// away while reads may be restarted from outside a reaction (Next): it is
// released by the final OnReadDone(false), or by Close when reading is
// paused, so StartRead never races with the end of the call.
class RegionWatch::Reactor final : public grpc::ClientReadReactor<v1::RegionEvent> {
 public:
  Reactor(v1::Xferd::Stub& stub, const v1::WatchRegionRequest& request) : request_(request) {
    stub.async()->WatchRegion(&context_, &request_, this);
    AddHold();
    StartRead(&incoming_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the stream is over; OnDone follows with its status
      RemoveHold();
      return;
    }
    bool read_more = false;
    {
      MutexLock lock(&state_->mu);
      state_->queue.push_back(std::move(incoming_));
      // Once closing, keep reading: the cancelled read ends the stream.
      state_->paused = state_->queue.size() >= kMaxBuffered && !state_->closing;
      read_more = !state_->paused;
    }
    if (read_more) StartRead(&incoming_);
  }

  void OnDone(const grpc::Status& status) override {
    // Close may destroy this reactor as soon as `done` is seen: the local
    // reference keeps the mutex alive until it is unlocked.
    const std::shared_ptr<State> state = state_;
    MutexLock lock(&state->mu);
    state->status = status;
    state->done = true;
  }

  // Returns the first buffered event, taking it if `take`. Errors: see Next.
  absl::StatusOr<v1::RegionEvent> Front(absl::Duration timeout, bool take) {
    State& s = *state_;
    bool resume = false;
    v1::RegionEvent event;
    {
      MutexLock lock(&s.mu);
      auto ready = [&s]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) { return !s.queue.empty() || s.done; };
      if (!s.mu.AwaitWithTimeout(ready, timeout)) {
        return absl::DeadlineExceededError(absl::StrCat("no event from the watch of region '",
                                                        request_.name(), "' within ",
                                                        absl::FormatDuration(timeout)));
      }
      if (s.queue.empty()) {
        if (!s.status.ok()) return FromGrpcStatus(s.status);
        return absl::OutOfRangeError(
            absl::StrCat("the watch of region '", request_.name(), "' has ended"));
      }
      if (!take) return s.queue.front();
      event = std::move(s.queue.front());
      s.queue.pop_front();
      resume = s.paused;
      s.paused = false;
    }
    // Paused means no read is outstanding and the hold is still held, so the
    // call cannot have ended: restarting the read here is safe.
    if (resume) StartRead(&incoming_);
    return event;
  }

  void Cancel() { context_.TryCancel(); }

  // Cancels, releases the hold if no read will release it, waits for OnDone.
  void Close() {
    context_.TryCancel();
    bool release = false;
    {
      MutexLock lock(&state_->mu);
      state_->closing = true;
      release = state_->paused;
      state_->paused = false;
    }
    if (release) RemoveHold();
    MutexLock lock(&state_->mu);
    state_->mu.Await([this] { return state_->done; });
  }

 private:
  struct State {
    Mutex mu;
    std::deque<v1::RegionEvent> queue ABSL_GUARDED_BY(mu);
    // The buffer is full and no read is outstanding.
    bool paused ABSL_GUARDED_BY(mu) = false;
    bool closing ABSL_GUARDED_BY(mu) = false;
    bool done ABSL_GUARDED_BY(mu) = false;
    grpc::Status status ABSL_GUARDED_BY(mu);
  };

  grpc::ClientContext context_;
  v1::WatchRegionRequest request_;
  v1::RegionEvent incoming_;  // written by gRPC between StartRead and OnReadDone
  const std::shared_ptr<State> state_ = std::make_shared<State>();
};

std::unique_ptr<RegionWatch> RegionWatch::Start(v1::Xferd::Stub& stub,
                                                const v1::WatchRegionRequest& request) {
  return std::unique_ptr<RegionWatch>(new RegionWatch(std::make_unique<Reactor>(stub, request)));
}

RegionWatch::RegionWatch(std::unique_ptr<Reactor> reactor) : reactor_(std::move(reactor)) {}

RegionWatch::~RegionWatch() { reactor_->Close(); }

absl::StatusOr<v1::RegionEvent> RegionWatch::Next(absl::Duration timeout) {
  return reactor_->Front(timeout, /*take=*/true);
}

absl::Status RegionWatch::AwaitSubscribed(absl::Duration timeout) {
  absl::StatusOr<v1::RegionEvent> first = reactor_->Front(timeout, /*take=*/false);
  if (!first.ok()) return first.status();
  if (first->kind() != v1::RegionEvent::KIND_SUBSCRIBED) {
    return absl::InternalError(
        absl::StrCat("the watch of region '", first->region(), "' began with ",
                     v1::RegionEvent::Kind_Name(first->kind()), " instead of KIND_SUBSCRIBED"));
  }
  return absl::OkStatus();
}

void RegionWatch::Cancel() { reactor_->Cancel(); }

}  // namespace xferd::client
