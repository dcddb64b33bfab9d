// The link of a daemon to itself: transfers whose peer is this daemon's own
// node id (two local processes handing data to each other through their
// daemon) copy region to region on the pollers, with no transport below.
// Each lane copies an op's blocks inside Post, on its poller's thread, and
// reports the op (and a write's landing) to that poller at once.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "daemon/transport/transport.h"

namespace xferd::engine {

class SelfLink final : public transport::Link {
 public:
  // `sinks[i]` is poller i, which alone posts on lane i; they outlive the link.
  SelfLink(transport::PeerIdentity self, std::vector<transport::CompletionSink*> sinks);
  ~SelfLink() override;

  // A daemon does not connect to itself.
  absl::Status Connect(const transport::PeerIdentity&, const transport::LinkEndpoints&,
                       absl::Time) override {
    return absl::FailedPreconditionError("the self link is always connected");
  }
  void Close(absl::Status reason) override { MarkBroken(std::move(reason)); }
  uint32_t lane_count() const override { return static_cast<uint32_t>(lanes_.size()); }
  transport::Lane& lane(uint32_t index) override;
  bool ready() const override { return true; }

 private:
  class SelfLane;
  std::vector<std::unique_ptr<SelfLane>> lanes_;
};

}  // namespace xferd::engine
