// Changes to local regions that reach beyond the registry: registering on the
// control executor (mapping and pinning take a while), deregistering (ending
// the transfers that use a region when forced, revoking every peer's keys and
// telling the peers that resolved it), and replacing a region's ACL (taking
// the keys back from the peers it leaves out). Observers hear of each change.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/engine/callback.h"
#include "daemon/engine/control_executor.h"
#include "daemon/engine/observers.h"
#include "daemon/engine/peer_manager.h"
#include "daemon/engine/tenants.h"
#include "daemon/engine/transfer_runner.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/transport.h"

namespace xferd::engine {

class RegionControl {
 public:
  // Every reference outlives the control.
  RegionControl(memory::RegionRegistry& regions, transport::Transport& transport,
                PeerManager& peers, TransferRunner& runner, ControlExecutor& executor);

  // Any thread: maps and registers on the control executor; `done` gets the
  // region there.
  void Register(memory::RegionSpec spec, Callback<std::shared_ptr<memory::Region>> done);
  // Returns transfers cancelled (force). Revokes its keys, tells the peers
  // that resolved it, then calls `peers_told` (if set; executor or inline)
  // with that count: a write they start then re-resolves. Not on error.
  // Only the region's owner may (PERMISSION_DENIED).
  absl::StatusOr<uint32_t> Deregister(const std::string& name, const Tenant& tenant, bool force,
                                      std::function<void(uint32_t)> peers_told);
  // Replaces a region's ACL (empty: any peer). Peers left out that resolved
  // it lose its keys at once and are told to forget them; then `done` gets
  // the region (executor or inline). INVALID_ARGUMENT, NOT_FOUND,
  // PERMISSION_DENIED (not `tenant`'s).
  void SetAcl(const std::string& name, const Tenant& tenant, std::vector<std::string> peers,
              Callback<std::shared_ptr<memory::Region>> done);

  // The region as `tenant` may use it: NOT_FOUND, or PERMISSION_DENIED
  // naming its owner. Any thread.
  absl::StatusOr<std::shared_ptr<memory::Region>> FindFor(absl::string_view name,
                                                          const Tenant& tenant) const;

  // Who hears that regions changed (null: nobody); outlives its use.
  void SetObserver(RegionObserver* observer);

 private:
  void Changed();

  memory::RegionRegistry& regions_;
  transport::Transport& transport_;
  PeerManager& peers_;
  TransferRunner& runner_;
  ControlExecutor& executor_;
  std::atomic<RegionObserver*> observer_{nullptr};
};

}  // namespace xferd::engine
