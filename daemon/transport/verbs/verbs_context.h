// One opened RDMA device shared by the verbs transport's workers and links:
// context, protection domain, the chosen port, and the device's counters and
// state (a daemon may drive several). Held by shared_ptr so it outlives
// every MR and QP made on it, whatever order owners go away in.
#pragma once

#include <atomic>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/ibv.h"

namespace xferd::transport::verbs {

struct VerbsContext {
  // Opens the selected device and allocates its protection domain.
  // `index`: the device's position in the transport's list.
  static absl::StatusOr<std::shared_ptr<VerbsContext>> Open(const PortSelection& port,
                                                           uint32_t index = 0);

  PortSelection port;
  uint32_t index = 0;
  // Payload bytes of our writes and reads that completed on this device (the
  // data path counts them; peers' writes land without our CPU, so they are
  // not counted per device), and ops moved from it to another device.
  std::atomic<uint64_t> bytes_sent{0};
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> failovers{0};
  // Device pairs of live links put back in service on this device (a
  // rejoin, both ends count it).
  std::atomic<uint64_t> rejoins{0};
  // Memory windows allocated on the device (memory_windows.h), against its
  // attr.max_mw.
  std::atomic<int64_t> windows{0};
  // False from a port-down event until the port is ACTIVE again.
  std::atomic<bool> up{true};
  // Port-ACTIVE events so far: each gives broken pairs fresh rejoin attempts.
  std::atomic<uint32_t> activations{0};
  ibv_device_attr attr{};
  // Declared in dependency order: the PD goes before the context.
  IbvContext context;
  IbvPd pd;
};

}  // namespace xferd::transport::verbs
