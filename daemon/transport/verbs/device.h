// RDMA device discovery and the choice of device, port, GID and MTU: what
// `ibv_devinfo -v` shows, in xferd's terms (transport/device_info.h, which
// the daemon reports), and which of it the verbs transport uses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/transport/device_info.h"

namespace xferd::transport::verbs {

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

}  // namespace xferd::transport::verbs
