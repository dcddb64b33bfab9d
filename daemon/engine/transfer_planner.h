// Turns a transfer request into a plan: checks the local region and range,
// binds the prepared layouts it names (and keeps them: PrepareLayout), checks
// the peer's resolved region and its access, and expands the blocks, cut at
// the slice size. It reads regions, peers and layouts and changes nothing
// else, so any thread may plan.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/common/config.h"
#include "daemon/engine/layouts.h"
#include "daemon/engine/peer.h"
#include "daemon/engine/peer_manager.h"
#include "daemon/engine/tenants.h"
#include "daemon/engine/transfer.h"
#include "daemon/memory/region_registry.h"

namespace xferd::engine {

class TransferPlanner {
 public:
  // Every reference outlives the planner.
  TransferPlanner(const EngineConfig& config, transport::TransportKind kind,
                  const memory::RegionRegistry& regions, const PeerManager& peers);

  // ---- prepared layouts (any thread) ----
  // A local region's layout is checked against the region now (OUT_OF_RANGE
  // naming the block); a peer's against the region's size when a transfer
  // uses it. Errors: INVALID_ARGUMENT, ALREADY_EXISTS, NOT_FOUND.
  // The layout belongs to `tenant`, whose regions alone it may name.
  absl::StatusOr<std::shared_ptr<const Layout>> PrepareLayout(Layout layout, const Tenant& tenant);
  absl::Status DeleteLayout(const std::string& name, const Tenant& tenant) {
    return layouts_.Remove(name, tenant);
  }
  std::vector<std::shared_ptr<const Layout>> ListLayouts() const { return layouts_.List(); }

  // ---- requests ----
  // What can be checked without the peer: the label's length, the layouts
  // it names (filling in its region names from them), the local region and
  // range, the block arrays' shape. Errors name the request's field.
  absl::Status CheckLocal(TransferSpec& spec) const;
  // The whole plan, with the peer's keys from `keys`. `*stale`: it failed
  // because the peer's link broke or its key was invalidated since
  // resolution (resolving again may succeed).
  absl::StatusOr<Transfer::Plan> Plan(const TransferSpec& spec, RemoteKeySnapshot& keys,
                                      bool* stale) const;

 private:
  absl::Status BindLayouts(TransferSpec& spec) const;
  absl::Status CheckLocalRange(const TransferSpec& spec) const;
  absl::Status CheckVerify(const TransferSpec& spec) const;
  absl::StatusOr<std::shared_ptr<const CachedKey>> CheckRemote(const TransferSpec& spec,
                                                               const Peer& peer,
                                                               RemoteKeySnapshot& keys,
                                                               bool* stale) const;
  absl::Status CheckRemoteAccess(const TransferSpec& spec, const Peer& peer,
                                 const CachedKey& key) const;
  absl::Status PlanMany(const TransferSpec& spec, const Peer& peer, uint64_t remote_size,
                        Transfer::Plan* plan) const;

  const EngineConfig& config_;
  const transport::TransportKind kind_;
  const memory::RegionRegistry& regions_;
  const PeerManager& peers_;
  LayoutRegistry layouts_;
};

}  // namespace xferd::engine
