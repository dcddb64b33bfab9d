#include "daemon/transport/verbs/queue_pair.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace xferd::transport::verbs {
namespace {

ibv_mtu MtuEnum(uint32_t bytes) {
  if (bytes >= 4096) return IBV_MTU_4096;
  if (bytes >= 2048) return IBV_MTU_2048;
  if (bytes >= 1024) return IBV_MTU_1024;
  if (bytes >= 512) return IBV_MTU_512;
  return IBV_MTU_256;
}

// Receiver-not-ready NAK delay requested from the peer: 12 = 0.64 ms.
constexpr uint8_t kMinRnrTimer = 12;

}  // namespace

absl::StatusOr<IbvQp> CreateRcQp(ibv_pd* pd, ibv_cq* cq, const QpCaps& caps, void* context,
                                 uint32_t* granted_inline) {
  ibv_qp_init_attr attr{};
  attr.qp_context = context;
  attr.send_cq = cq;
  attr.recv_cq = cq;
  attr.qp_type = IBV_QPT_RC;
  // Completions are requested per work request (selective signaling).
  attr.sq_sig_all = 0;
  attr.cap.max_send_wr = caps.send_depth;
  attr.cap.max_recv_wr = caps.recv_depth;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = caps.max_inline;
  IbvQp qp(ibv_create_qp(pd, &attr));
  if (qp == nullptr && caps.max_inline > 0) {
    // Some devices refuse any inline size they do not support: retry without.
    attr.cap.max_inline_data = 0;
    qp.reset(ibv_create_qp(pd, &attr));
  }
  if (qp == nullptr) return VerbsError("ibv_create_qp", errno);
  *granted_inline = attr.cap.max_inline_data;
  return qp;
}

absl::Status ModifyToInit(ibv_qp* qp, uint8_t port) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = port;
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  const int rc = ibv_modify_qp(
      qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  return rc == 0 ? absl::OkStatus() : VerbsError("ibv_modify_qp(INIT)", rc);
}

absl::Status ModifyToRtr(ibv_qp* qp, const QpPath& path, const QueuePairEndpoint& remote) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = MtuEnum(std::min(path.mtu, remote.mtu));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = path.max_dest_rd_atomic;
  attr.min_rnr_timer = kMinRnrTimer;
  attr.ah_attr.port_num = path.port;
  attr.ah_attr.dlid = remote.lid;
  if (path.ethernet) {
    // RoCE has no LIDs: packets are addressed by GID in a global route header.
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    attr.ah_attr.grh.sgid_index = path.sgid_index;
    attr.ah_attr.grh.hop_limit = 64;
  }
  const int rc =
      ibv_modify_qp(qp, &attr,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    return absl::Status(
        VerbsError("ibv_modify_qp(RTR)", rc).code(),
        absl::StrCat("ibv_modify_qp(RTR) towards QP ", remote.qpn, ": ", std::strerror(rc),
                     " (peers on different subnets, wrong GID index, or an MTU "
                     "the path does not carry?)"));
  }
  return absl::OkStatus();
}

absl::Status ModifyToRts(ibv_qp* qp, const QpPath& path, uint32_t local_psn) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = path.timeout;
  attr.retry_cnt = path.retry_count;
  attr.rnr_retry = path.rnr_retry;
  attr.sq_psn = local_psn;
  attr.max_rd_atomic = path.max_rd_atomic;
  const int rc = ibv_modify_qp(qp, &attr,
                               IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  return rc == 0 ? absl::OkStatus() : VerbsError("ibv_modify_qp(RTS)", rc);
}

absl::Status ModifyToError(ibv_qp* qp) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  const int rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
  return rc == 0 ? absl::OkStatus() : VerbsError("ibv_modify_qp(ERR)", rc);
}

}  // namespace xferd::transport::verbs
