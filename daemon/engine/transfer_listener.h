// What the engine's bookkeeping hears of a transfer's end (transfer.h):
// counted as it becomes visible, then announced off the poller.
#pragma once

#include "absl/status/status.h"
#include "daemon/engine/transfer_spec.h"

namespace xferd::engine {

class Transfer;

// Told when a transfer ends (the engine's bookkeeping), once, on the thread
// that decided it (often a poller), in two steps around the moment its end
// becomes visible (state(), Info()), so that whoever sees it ended also sees
// it counted. Both must only take note: no blocking, no lock held long
// elsewhere, no allocation, no strings.
class TransferListener {
 public:
  virtual ~TransferListener() = default;
  // Before the end is visible: count it.
  virtual void OnTransferEnding(const Transfer& transfer, TransferState state,
                                absl::StatusCode code) = 0;
  // After: hand the rest (history, metrics, logs, the read's landed event,
  // observers) to another thread, which calls Announce.
  virtual void OnTransferEnded(Transfer& transfer) = 0;
  // A failure the transport could not explain (transport::IsAccessRefused):
  // true if the listener looks into it and ends the transfer itself; false
  // to end it now with `error`. Once per transfer; must not block.
  virtual bool ExplainFailure(const Transfer& transfer, const absl::Status& error) { return false; }
  // A verified transfer checked at its peer (Plan::verify_at_peer) had all
  // its ops complete: true if the listener asks the peer for its checksums
  // and ends the transfer itself (FinishVerified); false to end it now.
  // Once per transfer; must not block.
  virtual bool VerifyAtPeer(const Transfer& transfer) { return false; }
};

}  // namespace xferd::engine
