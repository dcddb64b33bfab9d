#include "daemon/transport/verbs/verbs_context.h"

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace xferd::transport::verbs {

absl::StatusOr<std::shared_ptr<VerbsContext>> VerbsContext::Open(const PortSelection& port,
                                                                 uint32_t index) {
  int count = 0;
  IbvDeviceList list(ibv_get_device_list(&count));
  if (list == nullptr) return VerbsError("ibv_get_device_list", errno);
  auto ctx = std::make_shared<VerbsContext>();
  ctx->port = port;
  ctx->index = index;
  for (int i = 0; i < count && ctx->context == nullptr; ++i) {
    if (port.device == ibv_get_device_name(list.get()[i])) {
      ctx->context.reset(ibv_open_device(list.get()[i]));
      if (ctx->context == nullptr) return VerbsError("ibv_open_device(" + port.device + ")", errno);
    }
  }
  if (ctx->context == nullptr) {
    return absl::UnavailableError(absl::StrCat("RDMA device ", port.device, " disappeared"));
  }
  if (int rc = ibv_query_device(ctx->context.get(), &ctx->attr); rc != 0) {
    return VerbsError("ibv_query_device", rc);
  }
  ctx->pd.reset(ibv_alloc_pd(ctx->context.get()));
  if (ctx->pd == nullptr) return VerbsError("ibv_alloc_pd", errno);
  return ctx;
}

}  // namespace xferd::transport::verbs
