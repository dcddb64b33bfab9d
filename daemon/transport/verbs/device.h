// RDMA device discovery and the choice of device, port, GID and MTU: what
// `ibv_devinfo -v` shows, in xferd's terms. The types here carry no verbs
// headers, so the service layer can report them (xferctl devices).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xferd::transport::verbs {

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

// Every device, port and GID libibverbs can see. An empty list (not an
// error) on a machine without RDMA devices.
absl::StatusOr<std::vector<DeviceInfo>> QueryDevices();

// What the configuration asks for; empty/zero/-1 means "choose".
struct DeviceRequest {
  std::string device;
  uint32_t port = 0;
  int32_t gid_index = -1;
  uint32_t mtu = 0;  // bytes
};

struct PortSelection {
  std::string device;
  uint8_t port = 0;
  bool ethernet = false;
  GidEntry gid;
  uint16_t lid = 0;
  uint32_t mtu = 0;  // bytes
  uint64_t rate_mbps = 0;
  int32_t numa_node = -1;
  // One line for logs and NodeInfo, e.g.
  // "rxe0 port 1, Ethernet, RoCE v2 GID[1] ::ffff:10.9.9.1, MTU 1024".
  std::string description;
};

// Picks a device with an ACTIVE port; on Ethernet (RoCE) a RoCE v2 GID with
// an IPv4-mapped address first, then any RoCE v2, then RoCE v1; on
// InfiniBand GID 0 and the port's LID. FAILED_PRECONDITION says why nothing
// usable exists or why the request cannot be met.
absl::StatusOr<PortSelection> SelectPort(const std::vector<DeviceInfo>& devices,
                                         const DeviceRequest& request);

// Several devices: `names` lists them ("all": every device with an ACTIVE
// port, in libibverbs' order). Each gets SelectPort with the request's port,
// GID index and MTU. Names must be distinct; FAILED_PRECONDITION names the
// device that cannot be used and why.
absl::StatusOr<std::vector<PortSelection>> SelectPorts(const std::vector<DeviceInfo>& devices,
                                                       const std::vector<std::string>& names,
                                                       const DeviceRequest& request);

// The CPUs of a NUMA node (sysfs cpulist); empty when unknown.
std::vector<uint32_t> NodeCpus(int32_t node);

const char* PortStateName(PortState state);
const char* GidTypeName(GidType type);

}  // namespace xferd::transport::verbs
