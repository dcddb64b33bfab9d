// Who the engine tells of what happens in it, without depending on them: the
// metrics hear of transfers' ends, the cluster directory that regions changed.
#pragma once

#include "daemon/engine/transfer.h"

namespace xferd::engine {

// Told of every transfer's end, after the engine's own bookkeeping (metrics).
class TransferRecorder {
 public:
  virtual ~TransferRecorder() = default;
  // On the thread that ended the transfer, often a poller: must be quick,
  // never block and never call back into the engine.
  virtual void RecordTransfer(const TransferInfo& info) = 0;
};

// Told that the set of local regions changed (the cluster directory
// publishes their descriptions).
class RegionObserver {
 public:
  virtual ~RegionObserver() = default;
  // On the thread that registered or deregistered a region (the control
  // executor or a gRPC thread), after the registry changed: must be quick and
  // never block; it may call FindRegion / ListRegions later, from its own
  // thread.
  virtual void OnRegionsChanged() = 0;
};

}  // namespace xferd::engine
