// The opened RDMA device shared by the verbs transport's workers and links:
// context, protection domain and the chosen port. Held by shared_ptr so it
// outlives every MR and QP made on it, whatever order owners go away in.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/ibv.h"

namespace xferd::transport::verbs {

struct VerbsContext {
  // Opens the selected device and allocates its protection domain.
  static absl::StatusOr<std::shared_ptr<VerbsContext>> Open(const PortSelection& port);

  PortSelection port;
  ibv_device_attr attr{};
  // Declared in dependency order: the PD goes before the context.
  IbvContext context;
  IbvPd pd;
};

}  // namespace xferd::transport::verbs
