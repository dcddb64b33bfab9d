// Tenants (docs/tenants.md): who a client is, what it may see and how much
// it may use. The service and the local socket name a request's tenant from
// the caller's credentials; the engine keeps each tenant to its regions,
// layouts and transfers, its classes and its share of admission. Fixed at
// start-up from [tenants.<name>]: a Tenant lives as long as the engine, so
// requests and transfers hold plain pointers to it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/common/config.h"
#include "daemon/engine/priority.h"
#include "daemon/engine/rate_limit.h"
#include "daemon/memory/region.h"

namespace xferd::engine {

// A tenant's use now and its counts so far, for GetStats and the metrics.
struct TenantStats {
  std::string name;
  uint64_t max_registered_bytes = 0;  // 0: none of its own
  uint32_t max_inflight_transfers = 0;
  Priority max_priority = Priority::kCritical;
  uint64_t registered_bytes = 0;  // filled in by the engine (the registry's)
  uint32_t in_flight = 0;
  uint64_t submitted = 0;
  uint64_t bytes = 0;           // payload bytes of its ended transfers
  // Its ended transfers that had posted an op, and their summed wait from
  // submission to that first op (the mean: queue_wait / started).
  uint64_t started = 0;
  absl::Duration queue_wait;
  uint64_t refused_quota = 0;   // RESOURCE_EXHAUSTED by one of its limits
  uint64_t refused_access = 0;  // PERMISSION_DENIED: a class or another's object
  uint64_t max_bandwidth = 0;   // bytes per second; 0: none
  uint32_t weight = 1;
  bool admin = false;
};

class Tenant {
 public:
  // `index`: its place among the daemon's tenants (by name), which the
  // pollers' per-tenant state is indexed by.
  Tenant(const TenantConfig& config, uint32_t index);

  const std::string& name() const { return config_.name; }
  uint32_t index() const { return index_; }
  uint32_t weight() const { return config_.weight; }
  bool admin() const { return config_.admin; }
  // Whether it may act as the owner of what `owner` (a tenant's name) or
  // `other` owns: its own, or anyone's for an admin tenant.
  bool Owns(absl::string_view owner) const { return admin() || owner == name(); }
  bool Owns(const Tenant* other) const { return admin() || other == this; }
  // Its max_bandwidth, charged by the pollers as they post its ops.
  RateLimit& bandwidth() const { return bandwidth_; }
  const TenantConfig& config() const { return config_; }
  Priority max_priority() const { return max_priority_; }

  // Whether its clients may use `region` in transfers, watch and map it:
  // its own, or one shared with it. Any thread.
  bool MayUse(const memory::Region& region) const;
  // The same for a region `owner` registered, shared with the tenant names
  // in `shared_with` (one of another node's, as the cluster directory
  // describes it: any range of strings).
  template <typename Names>
  bool MayUse(absl::string_view owner, const Names& shared_with) const {
    return Owns(owner) || std::any_of(shared_with.begin(), shared_with.end(),
                                      [&](absl::string_view t) { return t == "*" || t == name(); });
  }
  // PERMISSION_DENIED naming the region's owner unless MayUse; counted.
  absl::Status CheckUse(const memory::Region& region) const;
  // PERMISSION_DENIED unless it owns `region` (deregistering, ACLs); counted.
  absl::Status CheckOwner(const memory::Region& region, absl::string_view action) const;
  // PERMISSION_DENIED above its max_priority; counted.
  absl::Status CheckPriority(Priority priority) const;

  // Takes `n` of its max_inflight_transfers, all or none: RESOURCE_EXHAUSTED
  // naming the limit and the use (counted). Any thread, lock-free.
  absl::Status Admit(uint32_t n) const;
  // Gives back one, when an admitted transfer ends (often on a poller),
  // with its payload bytes and, if it posted an op, its wait for that
  // first op.
  void Release(uint64_t bytes, std::optional<absl::Duration> queue_wait) const;
  // What Admit took for transfers that were then not started.
  void Unadmit(uint32_t n) const;
  // Refusals found elsewhere (a registration beyond its bytes quota).
  void CountRefusal(const absl::Status& error) const;
  // PERMISSION_DENIED with `message`, counted.
  absl::Status Denied(std::string message) const;

  TenantStats Stats() const;

 private:
  const TenantConfig config_;
  const uint32_t index_;
  const Priority max_priority_;
  mutable RateLimit bandwidth_;
  // Accounting, not state: a const Tenant counts.
  mutable std::atomic<uint32_t> in_flight_{0};
  mutable std::atomic<uint64_t> submitted_{0};
  mutable std::atomic<uint64_t> bytes_{0};
  mutable std::atomic<uint64_t> started_{0};
  mutable std::atomic<int64_t> queue_wait_ns_{0};
  mutable std::atomic<uint64_t> refused_quota_{0};
  mutable std::atomic<uint64_t> refused_access_{0};
};

class Tenants {
 public:
  // From validated config; "default" is added when not configured.
  explicit Tenants(const std::vector<TenantConfig>& configs);

  // Whether [tenants] is configured at all.
  bool configured() const { return configured_; }
  const Tenant& Default() const { return *default_; }
  // A local client by its socket credentials: its uid's tenant, else its
  // gid's, else the default.
  const Tenant& ForCredentials(uint32_t uid, uint32_t gid) const;
  // A client over TCP by its certificate's names: the first name a tenant
  // claims, else the default.
  const Tenant& ForCertificate(const std::vector<std::string>& names) const;
  // Null if no tenant has that name.
  const Tenant* Find(absl::string_view name) const;
  // Every tenant, by name.
  const std::vector<std::unique_ptr<Tenant>>& all() const { return all_; }

 private:
  bool configured_ = false;
  std::vector<std::unique_ptr<Tenant>> all_;
  const Tenant* default_ = nullptr;
  absl::flat_hash_map<uint32_t, const Tenant*> by_uid_;
  absl::flat_hash_map<uint32_t, const Tenant*> by_gid_;
  absl::flat_hash_map<std::string, const Tenant*> by_cert_name_;
};

}  // namespace xferd::engine
