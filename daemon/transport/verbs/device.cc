#include "daemon/transport/verbs/device.h"

#include <endian.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/transport/verbs/ibv.h"

namespace xferd::transport::verbs {
namespace {

uint32_t MtuBytes(ibv_mtu mtu) { return 128u << static_cast<int>(mtu); }

// ibv_port_attr's encodings (ibv_query_port(3)): lanes, and Mb/s per lane.
uint64_t RateMbps(uint8_t width, uint32_t speed) {
  uint64_t lanes = 0;
  switch (width) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: return 0;
  }
  uint64_t per_lane = 0;
  switch (speed) {
    case 1: per_lane = 2500; break;     // SDR
    case 2: per_lane = 5000; break;     // DDR
    case 4: case 8: per_lane = 10000; break;  // QDR, FDR10
    case 16: per_lane = 14062; break;   // FDR
    case 32: per_lane = 25781; break;   // EDR
    case 64: per_lane = 53125; break;   // HDR
    case 128: per_lane = 106250; break; // NDR
    case 256: per_lane = 212500; break; // XDR
    default: return 0;
  }
  return lanes * per_lane;
}

// A one-line sysfs file, or "" when it cannot be read.
std::string ReadSysfs(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return "";
  char line[4096] = {};
  const bool ok = std::fgets(line, sizeof(line), f) != nullptr;
  std::fclose(f);
  if (!ok) return "";
  std::string s(line);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

int32_t DeviceNumaNode(const std::string& device) {
  const std::string text = ReadSysfs("/sys/class/infiniband/" + device + "/device/numa_node");
  int32_t node = -1;
  if (text.empty() || !absl::SimpleAtoi(text, &node) || node < 0) return -1;
  return node;
}

PortState ToPortState(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_DOWN:
      return PortState::kDown;
    case IBV_PORT_INIT:
      return PortState::kInit;
    case IBV_PORT_ARMED:
      return PortState::kArmed;
    case IBV_PORT_ACTIVE:
      return PortState::kActive;
    case IBV_PORT_ACTIVE_DEFER:
      return PortState::kActiveDefer;
    default:
      return PortState::kUnknown;
  }
}

GidType ToGidType(uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_ROCE_V1:
      return GidType::kRoceV1;
    case IBV_GID_TYPE_ROCE_V2:
      return GidType::kRoceV2;
    default:
      return GidType::kIb;
  }
}

bool IsZero(const std::array<uint8_t, 16>& gid) {
  return std::all_of(gid.begin(), gid.end(), [](uint8_t b) { return b == 0; });
}

// Ports and GIDs of one opened device.
absl::Status QueryPorts(ibv_context* context, DeviceInfo& device) {
  ibv_device_attr attr{};
  if (int rc = ibv_query_device(context, &attr); rc != 0) return VerbsError("ibv_query_device", rc);
  device.node_guid = be64toh(attr.node_guid);
  uint32_t gid_entries = 0;
  for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
    ibv_port_attr port{};
    if (int rc = ibv_query_port(context, p, &port); rc != 0)
      return VerbsError("ibv_query_port", rc);
    PortInfo info;
    info.number = p;
    info.state = ToPortState(port.state);
    info.ethernet = port.link_layer == IBV_LINK_LAYER_ETHERNET;
    info.active_mtu = MtuBytes(port.active_mtu);
    info.max_mtu = MtuBytes(port.max_mtu);
    info.lid = port.lid;
    info.rate_mbps = RateMbps(port.active_width, port.active_speed);
    device.ports.push_back(info);
    gid_entries += static_cast<uint32_t>(port.gid_tbl_len);
  }
  std::vector<ibv_gid_entry> entries(std::max<uint32_t>(gid_entries, 1));
  const ssize_t n = ibv_query_gid_table(context, entries.data(), entries.size(), 0);
  if (n < 0) return VerbsError("ibv_query_gid_table", static_cast<int>(-n));
  for (ssize_t i = 0; i < n; ++i) {
    const ibv_gid_entry& e = entries[i];
    GidEntry gid;
    gid.index = e.gid_index;
    std::copy(std::begin(e.gid.raw), std::end(e.gid.raw), gid.raw.begin());
    gid.type = ToGidType(e.gid_type);
    char name[IF_NAMESIZE] = {};
    if (e.ndev_ifindex != 0 && if_indextoname(e.ndev_ifindex, name) != nullptr) gid.netdev = name;
    if (IsZero(gid.raw)) continue;
    for (PortInfo& port : device.ports) {
      if (port.number == e.port_num) port.gids.push_back(gid);
    }
  }
  for (PortInfo& port : device.ports) {
    std::sort(port.gids.begin(), port.gids.end(),
              [](const GidEntry& a, const GidEntry& b) { return a.index < b.index; });
  }
  return absl::OkStatus();
}

// Preference of a GID for RoCE: higher is better, 0 unusable.
int RoceRank(const GidEntry& gid) {
  if (gid.type == GidType::kRoceV2) return gid.ipv4_mapped() ? 3 : 2;
  if (gid.type == GidType::kRoceV1) return 1;
  return 0;
}

absl::StatusOr<GidEntry> ChooseGid(const std::string& device, const PortInfo& port,
                                   int32_t requested) {
  if (requested >= 0) {
    for (const GidEntry& gid : port.gids) {
      if (gid.index == static_cast<uint32_t>(requested)) return gid;
    }
    return absl::FailedPreconditionError(absl::StrCat("GID index ", requested, " is not set on ",
                                                      device, " port ", port.number,
                                                      " (transport.verbs_gid_index)"));
  }
  if (!port.ethernet) {
    if (!port.gids.empty()) return port.gids.front();
    return absl::FailedPreconditionError(
        absl::StrCat(device, " port ", port.number, " has no GID"));
  }
  const GidEntry* best = nullptr;
  for (const GidEntry& gid : port.gids) {
    if (RoceRank(gid) > 0 && (best == nullptr || RoceRank(gid) > RoceRank(*best))) best = &gid;
  }
  if (best == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        device, " port ", port.number,
        " has no RoCE GID: give its network device an IP address (RoCE v2 GIDs follow them)"));
  }
  return *best;
}

}  // namespace

absl::StatusOr<std::vector<DeviceInfo>> QueryDevices() {
  int count = 0;
  IbvDeviceList list(ibv_get_device_list(&count));
  std::vector<DeviceInfo> devices;
  if (list == nullptr) {
    // No uverbs support in the kernel at all: no devices, not a failure.
    if (errno == ENOSYS || errno == ENOENT || errno == ENODEV) return devices;
    return VerbsError("ibv_get_device_list", errno);
  }
  for (int i = 0; i < count; ++i) {
    DeviceInfo device;
    device.name = ibv_get_device_name(list.get()[i]);
    device.numa_node = DeviceNumaNode(device.name);
    IbvContext context(ibv_open_device(list.get()[i]));
    absl::Status status = context != nullptr ? QueryPorts(context.get(), device)
                                             : VerbsError("ibv_open_device", errno);
    if (!status.ok()) device.error = std::string(status.message());
    devices.push_back(std::move(device));
  }
  return devices;
}

absl::StatusOr<PortSelection> SelectPort(const std::vector<DeviceInfo>& devices,
                                         const DeviceRequest& request) {
  if (devices.empty()) {
    return absl::FailedPreconditionError("no RDMA device found (libibverbs lists none)");
  }
  std::vector<std::string> seen;
  for (const DeviceInfo& device : devices) {
    if (!request.device.empty() && device.name != request.device) continue;
    if (!device.error.empty()) {
      seen.push_back(absl::StrCat(device.name, ": ", device.error));
      continue;
    }
    for (const PortInfo& port : device.ports) {
      if (request.port != 0 && port.number != request.port) continue;
      if (port.state != PortState::kActive) {
        seen.push_back(
            absl::StrCat(device.name, " port ", port.number, " is ", PortStateName(port.state)));
        continue;
      }
      absl::StatusOr<GidEntry> gid = ChooseGid(device.name, port, request.gid_index);
      if (!gid.ok()) return gid.status();
      if (request.mtu > port.active_mtu) {
        return absl::FailedPreconditionError(
            absl::StrCat("transport.verbs_mtu ", request.mtu, " exceeds the active MTU ",
                         port.active_mtu, " of ", device.name, " port ", port.number));
      }
      PortSelection s;
      s.device = device.name;
      s.port = port.number;
      s.ethernet = port.ethernet;
      s.gid = *gid;
      s.lid = port.lid;
      s.mtu = request.mtu != 0 ? request.mtu : port.active_mtu;
      s.rate_mbps = port.rate_mbps;
      s.numa_node = device.numa_node;
      s.description = port.ethernet
                          ? absl::StrCat(device.name, " port ", port.number, ", Ethernet, ",
                                         GidTypeName(gid->type), " GID[", gid->index, "] ",
                                         gid->ToString(), ", MTU ", s.mtu)
                          : absl::StrCat(device.name, " port ", port.number, ", InfiniBand, LID ",
                                         port.lid, ", MTU ", s.mtu);
      return s;
    }
    if (request.port != 0 && seen.empty()) {
      seen.push_back(absl::StrCat(device.name, " has no port ", request.port));
    }
  }
  if (!request.device.empty() && seen.empty()) {
    std::vector<std::string> names;
    for (const DeviceInfo& d : devices) names.push_back(d.name);
    return absl::FailedPreconditionError(absl::StrCat(
        "RDMA device '", request.device, "' not found; present: ", absl::StrJoin(names, ", ")));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("no usable RDMA port: ", absl::StrJoin(seen, "; ")));
}

absl::StatusOr<std::vector<PortSelection>> SelectPorts(const std::vector<DeviceInfo>& devices,
                                                       const std::vector<std::string>& names,
                                                       const DeviceRequest& request) {
  std::vector<PortSelection> selected;
  if (names.size() == 1 && names[0] == "all") {
    std::vector<std::string> unusable;
    for (const DeviceInfo& device : devices) {
      DeviceRequest one = request;
      one.device = device.name;
      absl::StatusOr<PortSelection> port = SelectPort(devices, one);
      if (port.ok()) {
        selected.push_back(*std::move(port));
      } else {
        unusable.push_back(std::string(port.status().message()));
      }
    }
    if (selected.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "transport.verbs_devices = \"all\" found no device with an ACTIVE port",
          unusable.empty() ? " (libibverbs lists none)" : ": ", absl::StrJoin(unusable, "; ")));
    }
    return selected;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (names[i] == names[j]) {
        return absl::FailedPreconditionError(absl::StrCat(
            "transport.verbs_devices names ", names[i], " twice: list each device once"));
      }
    }
    DeviceRequest one = request;
    one.device = names[i];
    absl::StatusOr<PortSelection> port = SelectPort(devices, one);
    if (!port.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("transport.verbs_devices: ", port.status().message()));
    }
    selected.push_back(*std::move(port));
  }
  return selected;
}

std::vector<uint32_t> NodeCpus(int32_t node) {
  std::vector<uint32_t> cpus;
  if (node < 0) return cpus;
  const std::string list = ReadSysfs(absl::StrCat("/sys/devices/system/node/node", node, "/cpulist"));
  // "0-3,8-11"
  for (absl::string_view range : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> ends = absl::StrSplit(range, absl::MaxSplits('-', 1));
    uint32_t first = 0, last = 0;
    if (!absl::SimpleAtoi(ends.first, &first)) return {};
    if (ends.second.empty()) {
      last = first;
    } else if (!absl::SimpleAtoi(ends.second, &last) || last < first || last - first > 4096) {
      return {};
    }
    for (uint32_t c = first; c <= last; ++c) cpus.push_back(c);
  }
  return cpus;
}

}  // namespace xferd::transport::verbs
