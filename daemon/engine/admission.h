// Turns transfer requests into running transfers: checks at once what is
// local, admits them right there when every peer is connected and every
// remote key cached (the common case), and otherwise connects, reconnects
// and resolves what is missing on the control executor first. Validation is
// all or nothing; the timeout runs from submission.
#pragma once

#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "daemon/engine/callback.h"
#include "daemon/engine/control_executor.h"
#include "daemon/engine/lifecycle.h"
#include "daemon/engine/peer_manager.h"
#include "daemon/engine/peer_rpc.h"
#include "daemon/engine/tenants.h"
#include "daemon/engine/transfer_planner.h"
#include "daemon/engine/transfer_runner.h"

namespace xferd::engine {

class Admission {
 public:
  // Every reference outlives the admission.
  Admission(const Lifecycle& life, const Tenants& tenants, PeerManager& peers,
            const TransferPlanner& planner, TransferRunner& runner, PeerRpc& rpc,
            ControlExecutor& executor);

  // Any thread. `done` runs once, when the transfers are queued or refused
  // (inline, or on the control executor). `batch`: give them a batch id.
  void Submit(std::vector<TransferSpec> specs, bool batch,
              Callback<std::vector<std::shared_ptr<Transfer>>> done);

 private:
  // Whether every request's peer is connected and its remote key cached.
  bool Ready(const std::vector<TransferSpec>& specs) const;
  absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> ResolveAndAdmit(
      const std::vector<TransferSpec>& specs, bool batch, absl::Time submitted_at);
  absl::Status ConnectUnknown(const std::vector<TransferSpec>& specs, absl::Time deadline);
  absl::Status ReconnectBroken(const std::vector<TransferSpec>& specs, absl::Time deadline);
  absl::Status ResolveMissing(const std::vector<TransferSpec>& specs, absl::Time deadline);
  // Plans every request and starts them. `*stale`: see TransferPlanner::Plan.
  absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> Admit(
      const std::vector<TransferSpec>& specs, bool batch, absl::Time submitted_at, bool* stale);

  const Lifecycle& life_;
  const Tenants& tenants_;
  PeerManager& peers_;
  const TransferPlanner& planner_;
  TransferRunner& runner_;
  PeerRpc& rpc_;
  ControlExecutor& executor_;
};

}  // namespace xferd::engine
