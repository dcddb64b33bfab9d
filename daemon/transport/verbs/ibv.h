// RAII ownership of libibverbs objects: each is a std::unique_ptr whose
// deleter releases it (logging, never throwing, if the release fails).
// Holders declare them in dependency order (context, PD, channel, CQ, MR,
// QP, MW), so the compiler's reverse-order destruction tears them down right.
#pragma once

#include <infiniband/verbs.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace xferd::transport::verbs {

struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
struct ContextDeleter {
  void operator()(ibv_context* context) const;
};
struct PdDeleter {
  void operator()(ibv_pd* pd) const;
};
struct CompChannelDeleter {
  void operator()(ibv_comp_channel* channel) const;
};
struct CqDeleter {
  void operator()(ibv_cq* cq) const;
};
struct MrDeleter {
  void operator()(ibv_mr* mr) const;
};
struct QpDeleter {
  void operator()(ibv_qp* qp) const;
};
struct MwDeleter {
  void operator()(ibv_mw* mw) const;
};

using IbvDeviceList = std::unique_ptr<ibv_device*, DeviceListDeleter>;
using IbvContext = std::unique_ptr<ibv_context, ContextDeleter>;
using IbvPd = std::unique_ptr<ibv_pd, PdDeleter>;
using IbvCompChannel = std::unique_ptr<ibv_comp_channel, CompChannelDeleter>;
using IbvCq = std::unique_ptr<ibv_cq, CqDeleter>;
using IbvMr = std::unique_ptr<ibv_mr, MrDeleter>;
using IbvQp = std::unique_ptr<ibv_qp, QpDeleter>;
using IbvMw = std::unique_ptr<ibv_mw, MwDeleter>;

// A status for a failed verbs call: the call's name, errno text and, where
// errno has a usual cause, what to do about it (e.g. ENOMEM from
// ibv_reg_mr: the memlock limit).
absl::Status VerbsError(absl::string_view call, int err);

}  // namespace xferd::transport::verbs
