// A subscription to one region's events (xferd.v1.Xferd.WatchRegion): the
// stream is read on gRPC's callback threads into a bounded buffer, and the
// owner takes events with Next(timeout). Made by Client::WatchRegion.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "xferd/v1/xferd.grpc.pb.h"

namespace xferd::client {

class RegionWatch {
 public:
  // Starts the stream on `stub` (used only here; the call keeps its own
  // reference to the channel). Does not wait: see Client::WatchRegion.
  static std::unique_ptr<RegionWatch> Start(v1::Xferd::Stub& stub,
                                            const v1::WatchRegionRequest& request);

  // Cancels the stream and waits until gRPC is done with it.
  ~RegionWatch();

  RegionWatch(const RegionWatch&) = delete;
  RegionWatch& operator=(const RegionWatch&) = delete;

  // The next event, waiting up to `timeout` for one. One thread at a time.
  // Errors: DEADLINE_EXCEEDED (nothing arrived in time; the watch goes on),
  // OUT_OF_RANGE (the stream ended normally, after DEREGISTERED), or the
  // stream's own error (e.g. NOT_FOUND, UNAVAILABLE, CANCELLED after Cancel).
  absl::StatusOr<v1::RegionEvent> Next(absl::Duration timeout = absl::InfiniteDuration());

  // Waits up to `timeout` for the first event and checks it is SUBSCRIBED,
  // without taking it (Next returns it first). Errors: as Next, and INTERNAL
  // if the stream began with another kind. One thread at a time, with Next.
  absl::Status AwaitSubscribed(absl::Duration timeout);

  // Ends the stream early; Next then drains what was buffered and fails
  // with CANCELLED. Any thread.
  void Cancel();

 private:
  class Reactor;
  explicit RegionWatch(std::unique_ptr<Reactor> reactor);

  const std::unique_ptr<Reactor> reactor_;
};

}  // namespace xferd::client
