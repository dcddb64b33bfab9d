// RC queue pairs: creation and the RESET -> INIT -> RTR -> RTS state machine
// with the attribute masks of rdma-core's rc_pingpong, plus the move to ERR
// that flushes outstanding work at teardown.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "daemon/transport/transport_types.h"
#include "daemon/transport/verbs/ibv.h"

namespace xferd::transport::verbs {

struct QpCaps {
  uint32_t send_depth = 256;
  uint32_t recv_depth = 16;
  uint32_t max_inline = 64;  // requested; the device may grant less
};

// Where the local end of a path is and how it retransmits.
struct QpPath {
  uint8_t port = 1;
  bool ethernet = true;  // RoCE: address by GID (GRH); InfiniBand: by LID
  uint8_t sgid_index = 0;
  uint32_t mtu = 1024;  // bytes; the path uses min(local, remote)
  // Local ACK timeout 4.096 us * 2^timeout, and retries before the QP fails.
  uint8_t timeout = 14;
  uint8_t retry_count = 3;
  // Receiver-not-ready retries; 7 means "retry forever": a live peer reposts
  // its receives, a dead one is caught by the retry count and the deadline.
  uint8_t rnr_retry = 7;
  // RDMA READs outstanding as the requester (RTS) and served at once as the
  // responder (RTR): what the handshake negotiated for this link.
  uint8_t max_rd_atomic = 1;
  uint8_t max_dest_rd_atomic = 1;
};

// Creates an RC QP on `cq` (send and receive). `context` is stored in
// qp->qp_context for async events. `granted_inline` gets the device's answer.
absl::StatusOr<IbvQp> CreateRcQp(ibv_pd* pd, ibv_cq* cq, const QpCaps& caps, void* context,
                                 uint32_t* granted_inline);

// RESET -> INIT, allowing remote writes and reads (the MRs say which regions allow what).
absl::Status ModifyToInit(ibv_qp* qp, uint8_t port);
// INIT -> RTR towards `remote`.
absl::Status ModifyToRtr(ibv_qp* qp, const QpPath& path, const QueuePairEndpoint& remote);
// RTR -> RTS with our initial PSN.
absl::Status ModifyToRts(ibv_qp* qp, const QpPath& path, uint32_t local_psn);
// Any state -> ERR: outstanding work requests complete with flush errors.
absl::Status ModifyToError(ibv_qp* qp);

}  // namespace xferd::transport::verbs
