// The configuration of a tenant ([tenants.<name>], docs/tenants.md), and the
// name of the tenant nobody configured: on its own so that the memory layer
// (a region's owner) needs no more of the configuration than this.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xferd {

// [tenants.<name>]: who a client is and what it may do (docs/tenants.md).
// Local clients are matched by their unix socket credentials (uid first,
// then primary gid), clients over TCP by their mTLS certificate's names;
// whoever matches none is tenant "default", whose limits [tenants.default]
// may set. Without [tenants], every client is "default" without limits.
struct TenantConfig {
  std::string name;
  std::vector<uint32_t> uids;
  std::vector<uint32_t> gids;
  std::vector<std::string> cert_names;
  // 0: no cap beyond regions.max_registered_bytes.
  uint64_t max_registered_bytes = 0;
  // 0: no cap beyond engine.max_inflight_transfers.
  uint32_t max_inflight_transfers = 0;
  // The highest class its transfers may ask for: "critical", "normal",
  // "bulk" or "background".
  std::string max_priority = "critical";
  // Bytes per second its transfers may post, writes and reads together,
  // over all pollers (0: no cap).
  uint64_t max_bandwidth = 0;
  // Its share of a class's lanes beside other tenants' transfers of the
  // same class, when they are saturated.
  uint32_t weight = 1;
  // An operators' tenant: its clients see and act on every tenant's
  // regions, layouts and transfers (its own limits still hold).
  bool admin = false;
};

// The name of the tenant of clients that match no [tenants.<name>].
inline constexpr const char* kDefaultTenant = "default";

}  // namespace xferd
