// What a striped lane (striped_lane.h) needs of the lanes it stripes ops
// over and of its poller, as interfaces: a VerbsLane per device pair and the
// StripedWorker in the daemon, fakes in tests, so that striping (weights,
// bytes in flight, failover, rejoin) runs without an RDMA device.
#pragma once

#include <cstdint>
#include <memory>

#include "daemon/transport/transport.h"

namespace xferd::transport::verbs {

class StripedLane;

// Receives a lane's op completions instead of the engine's sink: the striped
// lane above it, which moves a failed device's ops to another device.
class OpReporter {
 public:
  virtual ~OpReporter() = default;
  // Poller thread, once per op the lane took, in the order it took them.
  virtual void OnLaneOpDone(uint32_t sub, const OpCompletion& completion,
                            CompletionSink& sink) = 0;
};

// One device pair's lane of one poller (a VerbsLane).
class PairLane : public Lane {
 public:
  // Whether `remote`'s keys work on this lane: it has keys on the peer's
  // device this lane reaches, bound (if per lane) to the queue pair it is
  // connected to.
  virtual bool Reaches(const RemoteRegion& remote) const = 0;
  // Completions go to `reporter` (as its sub-lane `sub`) rather than the
  // sink. Control thread before the lane carries ops, or its poller.
  virtual void set_reporter(OpReporter* reporter, uint32_t sub) = 0;
};

// The poller's list of striped lanes holding ops that wait to move (the
// StripedWorker): it services them on its passes.
class WaitingLanes {
 public:
  virtual ~WaitingLanes() = default;
  // Poller thread: `lane` holds ops to move; `keep_alive` owns it.
  virtual void ListWaiting(StripedLane* lane, std::shared_ptr<Link> keep_alive) = 0;
};

}  // namespace xferd::transport::verbs
