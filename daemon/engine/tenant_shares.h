// How a poller shares one class's lanes between tenants (docs/tenants.md):
// each tenant's bytes posted per unit of its weight is its virtual time,
// and the class's transfers are visited tenant by tenant, the least served
// first, round robin within a tenant. When the lanes take less than all
// have (credits, PollerOptions::lane_bytes), the bytes go by weight. A
// tenant back from idle starts at the least of the busy ones' times, so it
// cannot bank the time it was idle. Poller thread only; sized once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "daemon/engine/tenants.h"
#include "daemon/engine/transfer.h"

namespace xferd::engine {

class TenantShares {
 public:
  TenantShares(uint32_t tenants, uint32_t max_transfers) : vtime_(tenants, 0) {
    order_.reserve(max_transfers);
  }

  // Indices into `active` in the order to serve them: from `start` round
  // robin, then (with more than one tenant) by their tenants' times, stably.
  const std::vector<uint32_t>& Order(const std::vector<std::shared_ptr<Transfer>>& active,
                                     size_t start) {
    const size_t n = active.size();
    order_.clear();
    for (size_t k = 0; k < n; ++k) order_.push_back(static_cast<uint32_t>((start + k) % n));
    if (vtime_.size() < 2) return order_;
    uint64_t least = UINT64_MAX;
    for (const auto& t : active) {
      uint64_t& v = vtime_[TenantOf(*t).index()];
      v = std::max(v, floor_);
      least = std::min(least, v);
    }
    floor_ = least;
    std::stable_sort(order_.begin(), order_.end(), [&](uint32_t a, uint32_t b) {
      return vtime_[TenantOf(*active[a]).index()] < vtime_[TenantOf(*active[b]).index()];
    });
    return order_;
  }

  // `bytes` were posted for `transfer`'s tenant.
  void Charge(const Transfer& transfer, uint64_t bytes) {
    if (vtime_.size() < 2) return;
    const Tenant& tenant = TenantOf(transfer);
    vtime_[tenant.index()] += bytes / tenant.weight();
  }

 private:
  // Admission gives every transfer its tenant.
  static const Tenant& TenantOf(const Transfer& t) { return *t.plan().spec.tenant; }

  std::vector<uint64_t> vtime_;  // by Tenant::index()
  uint64_t floor_ = 0;
  std::vector<uint32_t> order_;
};

}  // namespace xferd::engine
