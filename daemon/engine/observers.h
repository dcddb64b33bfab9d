// Who the engine tells of what happens in it, and asks what it does not
// know, without depending on them: the metrics hear of transfers' ends; the
// cluster directory hears that regions changed and finds nodes by id.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
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

// Where the engine looks up the address of a node id it has no link to
// (the cluster directory), so that writes, reads and ConnectPeer may name a
// node never connected.
class NodeDirectory {
 public:
  virtual ~NodeDirectory() = default;
  // The gRPC address of the live node `node_id`. On the control executor;
  // may block until `deadline`. Errors: NOT_FOUND (no live node of that id:
  // the message says so and where it looked), UNAVAILABLE (the directory
  // cannot be reached; the message names it).
  virtual absl::StatusOr<std::string> AddressOf(const std::string& node_id,
                                                absl::Time deadline) = 0;
};

}  // namespace xferd::engine
