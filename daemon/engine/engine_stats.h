// What Engine::Stats() reports: the daemon's transfers, bytes, regions,
// peers and pollers, and the transport's own resources, for the service's
// Stats call and the Prometheus metrics.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/engine/poller.h"
#include "daemon/engine/tenants.h"
#include "daemon/engine/transfer_table.h"
#include "daemon/transport/transport.h"

namespace xferd::engine {

// Traffic with one peer node, summed over all its links (reconnects included),
// so it only grows for as long as the daemon runs.
struct PeerTraffic {
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t rejected_writes = 0;  // inbound writes from it that were refused
};

struct EngineStats {
  TransferCounters transfers;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t rejected_writes = 0;
  uint64_t landed_events = 0;
  uint32_t regions = 0;
  uint64_t registered_bytes = 0;
  uint32_t peers = 0;
  uint32_t lanes = 0;
  std::vector<PollerStats> pollers;
  // What the transport itself holds open (QPs/connections, MRs).
  transport::TransportStats transport;
  // By node id, for every peer connected since the start. Consistent with
  // the totals above: a link being retired is counted exactly once.
  std::map<std::string, PeerTraffic> traffic;
  // Every tenant, by name ("default" included).
  std::vector<TenantStats> tenants;
};

}  // namespace xferd::engine
