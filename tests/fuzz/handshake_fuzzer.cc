// Fuzzes what a peer sends in a handshake: the bytes of a
// v1::HandshakeRequest (the responder's view) and of a v1::HandshakeResponse
// (the initiator's view), through the service layer's conversion
// (FromProto(NodeIdentity, LinkEndpoints)) and then the transports' own
// checks (verbs::CheckEndpoints, tcp::CheckEndpoints), as the engine runs
// them. Whatever passes must keep the promises the transports rely on, and
// what the conversion accepts converts back to the same domain value.
#include <cstdint>
#include <string>

#include "daemon/service/peer_convert.h"
#include "daemon/transport/tcp/tcp_transport.h"
#include "daemon/transport/verbs/endpoint_check.h"
#include "tests/fuzz/fuzz_check.h"
#include "xferd/v1/peer.pb.h"

namespace xferd::service {
namespace {

bool SameEndpoints(const transport::LinkEndpoints& a, const transport::LinkEndpoints& b) {
  if (a.kind != b.kind || a.lanes != b.lanes || a.devices.size() != b.devices.size() ||
      a.tcp.host != b.tcp.host || a.tcp.port != b.tcp.port ||
      a.tcp.session_token != b.tcp.session_token || a.notice_ring_slots != b.notice_ring_slots ||
      a.max_rd_atomic != b.max_rd_atomic || a.max_dest_rd_atomic != b.max_dest_rd_atomic) {
    return false;
  }
  for (size_t d = 0; d < a.devices.size(); ++d) {
    const transport::DeviceEndpoints& u = a.devices[d];
    const transport::DeviceEndpoints& v = b.devices[d];
    if (u.name != v.name || u.index != v.index || u.peer_device != v.peer_device ||
        u.rate_mbps != v.rate_mbps || u.notice_ring_addr != v.notice_ring_addr ||
        u.notice_ring_rkey != v.notice_ring_rkey || u.queue_pairs.size() != v.queue_pairs.size()) {
      return false;
    }
    for (size_t i = 0; i < u.queue_pairs.size(); ++i) {
      const transport::QueuePairEndpoint& x = u.queue_pairs[i];
      const transport::QueuePairEndpoint& y = v.queue_pairs[i];
      if (x.qpn != y.qpn || x.psn != y.psn || x.lid != y.lid || x.gid != y.gid ||
          x.gid_index != y.gid_index || x.mtu != y.mtu || x.notice_rkey != y.notice_rkey) {
        return false;
      }
    }
  }
  return true;
}

void Check(const v1::NodeIdentity& node, const v1::LinkEndpoints& endpoints) {
  absl::StatusOr<engine::HandshakeMessage> message = FromProto(node, endpoints);
  if (!message.ok()) {
    FUZZ_CHECK(message.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  const transport::LinkEndpoints& e = message->endpoints;
  FUZZ_CHECK(!message->node.node_id.empty());
  FUZZ_CHECK(e.lanes >= 1 && e.lanes <= kMaxLanes);
  // What the conversion accepts survives our own encoding unchanged.
  v1::LinkEndpoints again;
  ToProto(e, &again);
  absl::StatusOr<transport::LinkEndpoints> round_trip = FromProto(again);
  FUZZ_CHECK(round_trip.ok());
  FUZZ_CHECK(SameEndpoints(e, *round_trip));
  absl::Status verbs = transport::verbs::CheckEndpoints(e);
  absl::Status tcp = transport::tcp::CheckEndpoints(e);
  FUZZ_CHECK(verbs.ok() || verbs.code() == absl::StatusCode::kInvalidArgument);
  FUZZ_CHECK(tcp.ok() || tcp.code() == absl::StatusCode::kInvalidArgument);
  if (!verbs.ok() || !tcp.ok()) return;
  if (e.kind == transport::TransportKind::kVerbs) {
    FUZZ_CHECK(!e.devices.empty() && e.devices.size() <= transport::kMaxDevices);
    FUZZ_CHECK(e.notice_ring_slots >= 1 && e.notice_ring_slots <= (1u << 16));
    // Both go into 8-bit QP attributes; 0 would stall every RDMA READ.
    FUZZ_CHECK(e.max_rd_atomic >= 1 && e.max_rd_atomic <= 255);
    FUZZ_CHECK(e.max_dest_rd_atomic >= 1 && e.max_dest_rd_atomic <= 255);
    for (const transport::DeviceEndpoints& d : e.devices) {
      FUZZ_CHECK(d.queue_pairs.size() == e.lanes);
      FUZZ_CHECK(d.index < transport::kMaxDevices && d.peer_device < transport::kMaxDevices);
      for (const transport::QueuePairEndpoint& qp : d.queue_pairs) {
        FUZZ_CHECK(qp.qpn <= 0xffffff && qp.psn <= 0xffffff);
        FUZZ_CHECK(qp.mtu >= 256 && qp.mtu <= 4096 && (qp.mtu & (qp.mtu - 1)) == 0);
      }
    }
  } else {
    FUZZ_CHECK(e.kind == transport::TransportKind::kTcp);
    FUZZ_CHECK(e.devices.empty());
    FUZZ_CHECK(e.tcp.host.size() <= 255 && e.tcp.session_token.size() <= 64);
  }
}

}  // namespace
}  // namespace xferd::service

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xferd;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  v1::HandshakeRequest request;
  if (request.ParseFromString(bytes)) service::Check(request.caller(), request.endpoints());
  v1::HandshakeResponse response;
  if (response.ParseFromString(bytes)) service::Check(response.callee(), response.endpoints());
  return 0;
}
