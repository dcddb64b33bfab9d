#include "daemon/transport/verbs/endpoint_check.h"

#include "absl/strings/str_cat.h"

namespace xferd::transport::verbs {
namespace {

// The MTUs of the IB spec (ibv_mtu): anything else names no path MTU.
bool ValidMtu(uint32_t mtu) {
  return mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096;
}

absl::Status CheckDevice(const DeviceEndpoints& d, uint32_t lanes) {
  if (d.name.size() > 64 || d.index >= kMaxDevices || d.peer_device >= kMaxDevices) {
    return absl::InvalidArgumentError("malformed RDMA device in handshake");
  }
  if (d.queue_pairs.size() != lanes) {
    return absl::InvalidArgumentError(
        absl::StrCat("handshake has ", d.queue_pairs.size(), " queue pairs for ", lanes, " lanes"));
  }
  for (const QueuePairEndpoint& qp : d.queue_pairs) {
    // QPNs and PSNs are 24 bits on the wire.
    if (qp.psn > 0xffffff || qp.qpn > 0xffffff || !ValidMtu(qp.mtu)) {
      return absl::InvalidArgumentError("malformed queue pair endpoint in handshake");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckEndpoints(const LinkEndpoints& e) {
  if (e.kind != TransportKind::kVerbs) return absl::OkStatus();
  if (e.devices.size() > kMaxDevices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "handshake offers ", e.devices.size(), " RDMA devices; expected at most ", kMaxDevices));
  }
  for (const DeviceEndpoints& d : e.devices) {
    if (absl::Status s = CheckDevice(d, e.lanes); !s.ok()) return s;
  }
  if (e.notice_ring_slots == 0 || e.notice_ring_slots > (1u << 16)) {
    return absl::InvalidArgumentError("malformed notice ring in handshake");
  }
  // ibv_qp_attr holds both in 8 bits; 0 would leave RDMA READs waiting forever.
  if (e.max_rd_atomic == 0 || e.max_rd_atomic > 255 || e.max_dest_rd_atomic == 0 ||
      e.max_dest_rd_atomic > 255) {
    return absl::InvalidArgumentError(absl::StrCat("handshake offers max_rd_atomic ",
                                                   e.max_rd_atomic, " and max_dest_rd_atomic ",
                                                   e.max_dest_rd_atomic, "; expected 1..255"));
  }
  return absl::OkStatus();
}

}  // namespace xferd::transport::verbs
