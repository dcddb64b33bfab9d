#include "daemon/transport/verbs/ibv.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"

namespace xferd::transport::verbs {
namespace {

// Destroy calls return an errno value (0 on success).
void LogIfFailed(const char* call, int rc) {
  if (rc != 0) spdlog::warn("{} failed: {}", call, std::strerror(rc));
}

}  // namespace

void ContextDeleter::operator()(ibv_context* c) const {
  LogIfFailed("ibv_close_device", ibv_close_device(c));
}
void PdDeleter::operator()(ibv_pd* pd) const { LogIfFailed("ibv_dealloc_pd", ibv_dealloc_pd(pd)); }
void CompChannelDeleter::operator()(ibv_comp_channel* ch) const {
  LogIfFailed("ibv_destroy_comp_channel", ibv_destroy_comp_channel(ch));
}
void CqDeleter::operator()(ibv_cq* cq) const { LogIfFailed("ibv_destroy_cq", ibv_destroy_cq(cq)); }
void MrDeleter::operator()(ibv_mr* mr) const { LogIfFailed("ibv_dereg_mr", ibv_dereg_mr(mr)); }
void QpDeleter::operator()(ibv_qp* qp) const { LogIfFailed("ibv_destroy_qp", ibv_destroy_qp(qp)); }
void MwDeleter::operator()(ibv_mw* mw) const { LogIfFailed("ibv_dealloc_mw", ibv_dealloc_mw(mw)); }

absl::Status VerbsError(absl::string_view call, int err) {
  const std::string text = absl::StrCat(call, ": ", std::strerror(err));
  switch (err) {
    case ENOMEM:
      return absl::ResourceExhaustedError(
          absl::StrCat(text,
                       " (out of device resources, or the locked-memory limit is too low: check "
                       "`ulimit -l`; under systemd set LimitMEMLOCK=infinity)"));
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(
          absl::StrCat(text, " (no access to /dev/infiniband/uverbs*?)"));
    case ENODEV:
    case ENOENT:
    case ENXIO:
      return absl::UnavailableError(text);
    case EINVAL:
    case EOPNOTSUPP:
      return absl::InvalidArgumentError(text);
    default:
      return absl::InternalError(text);
  }
}

}  // namespace xferd::transport::verbs
