// The verbs transport's check of a peer's link endpoints (a handshake's or a
// rejoin's) before anything is built from them: the limits of queue pairs,
// devices and the notice ring. Free of libibverbs, so it is unit-tested and
// fuzzed without a device.
#pragma once

#include "absl/status/status.h"
#include "daemon/transport/transport_types.h"

namespace xferd::transport::verbs {

// OK if verbs endpoints `e` are within what a queue pair and the notice ring
// can take: at most kMaxDevices devices, each named in at most 64 bytes with
// indices below kMaxDevices and one queue pair per lane (24-bit QPN and PSN,
// an IB MTU of 256..4096 bytes); 1..65536 notice slots per lane; RDMA READ
// depths of 1..255. Endpoints of another transport pass (the link names the
// mismatch). INVALID_ARGUMENT saying what is malformed. Any thread; pure.
absl::Status CheckEndpoints(const LinkEndpoints& e);

}  // namespace xferd::transport::verbs
