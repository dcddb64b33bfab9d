// Picks and builds the daemon's transport from its configuration:
// kind = auto | tcp | verbs, and require_rdma. The choice and its reason are
// reported (logs, NodeInfo), so falling back to TCP is never silent.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/common/config.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/device_info.h"
#include "daemon/transport/transport.h"

namespace xferd::transport {

struct TransportChoiceResult {
  std::unique_ptr<Transport> transport;
  // Why this transport, e.g. "auto: no RDMA device found, using tcp".
  std::string reason;
};

// FAILED_PRECONDITION when verbs is required (kind = verbs or require_rdma)
// but no usable RDMA device exists; other errors from building the transport.
absl::StatusOr<TransportChoiceResult> CreateTransport(const Config& config,
                                                      const memory::RegionRegistry& regions);

// The host's RDMA devices, ports and GIDs, whatever transport was chosen (an
// empty list without RDMA): main gives it to the engine for ListDevices.
absl::StatusOr<std::vector<DeviceInfo>> QueryHostDevices();

}  // namespace xferd::transport
