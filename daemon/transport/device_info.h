// The host's RDMA devices as the daemon reports them (ListDevices, `xferctl
// devices`): devices, ports and GIDs in xferd's terms, free of verbs types.
// The verbs transport fills them (transport/verbs/device.h); the engine
// hands them to the service through a DeviceQuery main sets.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xferd::transport {

enum class GidType { kIb, kRoceV1, kRoceV2 };

struct GidEntry {
  uint32_t index = 0;
  std::array<uint8_t, 16> raw{};
  GidType type = GidType::kIb;
  std::string netdev;  // the Ethernet device a RoCE GID belongs to

  // "::ffff:10.9.9.1" style text.
  std::string ToString() const;
  bool ipv4_mapped() const;
};

enum class PortState { kDown, kInit, kArmed, kActive, kActiveDefer, kUnknown };

struct PortInfo {
  uint8_t number = 0;
  PortState state = PortState::kUnknown;
  bool ethernet = false;    // link layer: Ethernet (RoCE) or InfiniBand
  uint32_t active_mtu = 0;  // bytes
  uint32_t max_mtu = 0;
  uint16_t lid = 0;
  // Signalling rate: active width x active speed, Mb/s (0 if the device
  // reports neither). Striping weighs devices by it.
  uint64_t rate_mbps = 0;
  std::vector<GidEntry> gids;
};

struct DeviceInfo {
  std::string name;
  uint64_t node_guid = 0;  // host byte order
  std::vector<PortInfo> ports;
  // The NUMA node of the device's PCI function (sysfs); -1 when unknown
  // (software devices such as rxe, or a single-node machine).
  int32_t numa_node = -1;
  // Set when the device could not be opened or queried.
  std::string error;
};

// Lists every RDMA device, port and GID of the host: an empty list (not an
// error) on a machine without any. Any thread.
using DeviceQuery = std::function<absl::StatusOr<std::vector<DeviceInfo>>()>;

const char* PortStateName(PortState state);
const char* GidTypeName(GidType type);

}  // namespace xferd::transport
