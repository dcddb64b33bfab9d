// What a transport reports of itself: its RDMA port, its devices, its
// lanes and registrations (GetStats, the metrics).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xferd::transport {

// The RDMA port and GID a verbs transport uses.
struct RdmaPortInUse {
  std::string device;
  uint32_t port = 0;
  uint32_t gid_index = 0;
};

// One RDMA device a verbs transport drives, as stats report it.
struct DeviceStats {
  std::string name;  // "rxe0"
  uint32_t port = 0;
  uint32_t gid_index = 0;
  bool up = true;                     // its port is ACTIVE (false after a port-down event)
  int32_t numa_node = -1;             // from sysfs; -1 unknown
  uint64_t rate_mbps = 0;             // active width x speed
  std::vector<uint32_t> poller_cpus;  // CPUs its pollers are pinned to; empty = not pinned
  uint64_t bytes_sent = 0;            // our writes acknowledged on this device
  uint64_t bytes_received = 0;        // our reads, and peers' landed writes, on this device
  uint64_t failovers = 0;             // ops moved off this device to another one
  uint64_t rejoins = 0;               // device pairs of live links back in service on it
  // Memory windows open on it (keys granted to one lane of one peer each),
  // against the device's limit (attr.max_mw; 0 when it has none).
  uint32_t memory_windows = 0;
  uint32_t max_memory_windows = 0;
};

struct TransportStats {
  uint32_t lanes = 0;
  uint32_t memory_registrations = 0;
  // Verbs: memory windows open (keys granted to one lane of one peer each).
  uint32_t memory_windows = 0;
  std::vector<DeviceStats> devices;  // verbs only
};

}  // namespace xferd::transport
