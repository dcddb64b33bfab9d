#include "daemon/service/peer_convert.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/service/proto_convert.h"

namespace xferd::service {
namespace {

void ToProto(const transport::QueuePairEndpoint& qp, v1::QueuePairEndpoint* q) {
  q->set_qpn(qp.qpn);
  q->set_psn(qp.psn);
  q->set_lid(qp.lid);
  q->set_gid(std::string(reinterpret_cast<const char*>(qp.gid.data()), qp.gid.size()));
  q->set_gid_index(qp.gid_index);
  q->set_mtu(qp.mtu);
  q->set_notice_rkey(qp.notice_rkey);
}

// A queue pair that fits the domain type: a 16-byte GID, an index and a LID
// within their widths. What a queue pair may hold beyond that is the
// transport's to check (Transport::CheckEndpoints).
absl::StatusOr<transport::QueuePairEndpoint> FromProto(const v1::QueuePairEndpoint& q) {
  if (q.gid().size() != 16 || q.gid_index() > 255 || q.lid() > 0xffff) {
    return absl::InvalidArgumentError("malformed queue pair endpoint in handshake");
  }
  transport::QueuePairEndpoint qp;
  qp.qpn = q.qpn();
  qp.psn = q.psn();
  qp.lid = static_cast<uint16_t>(q.lid());
  std::copy(q.gid().begin(), q.gid().end(), qp.gid.begin());
  qp.gid_index = static_cast<uint8_t>(q.gid_index());
  qp.mtu = q.mtu();
  qp.notice_rkey = q.notice_rkey();
  return qp;
}

// One device's queue pairs and notice ring: a v1::DeviceEndpoints, or the
// fields of v1::LinkEndpoints an older daemon (one device) fills instead.
template <typename Message>
absl::StatusOr<transport::DeviceEndpoints> DeviceFromProto(const Message& m) {
  transport::DeviceEndpoints d;
  for (const v1::QueuePairEndpoint& q : m.queue_pairs()) {
    ASSIGN_OR_RETURN(transport::QueuePairEndpoint qp, FromProto(q));
    d.queue_pairs.push_back(qp);
  }
  d.notice_ring_addr = m.notice_ring_addr();
  d.notice_ring_rkey = m.notice_ring_rkey();
  return d;
}

}  // namespace

void ToProto(const engine::NodeIdentity& node, v1::NodeIdentity* out) {
  out->set_node_id(node.node_id);
  out->set_incarnation(node.incarnation);
  out->set_address(node.address);
}

engine::NodeIdentity FromProto(const v1::NodeIdentity& node) {
  return engine::NodeIdentity{node.node_id(), node.incarnation(), node.address()};
}

void ToProto(const transport::LinkEndpoints& e, v1::LinkEndpoints* out) {
  out->set_transport(ToProto(e.kind));
  out->set_lanes(e.lanes);
  for (const transport::DeviceEndpoints& d : e.devices) {
    v1::DeviceEndpoints* p = out->add_devices();
    p->set_name(d.name);
    p->set_index(d.index);
    p->set_peer_device(d.peer_device);
    p->set_rate_mbps(d.rate_mbps);
    for (const transport::QueuePairEndpoint& qp : d.queue_pairs) {
      ToProto(qp, p->add_queue_pairs());
    }
    p->set_notice_ring_addr(d.notice_ring_addr);
    p->set_notice_ring_rkey(d.notice_ring_rkey);
  }
  // The first device again in the fields older daemons read.
  if (!e.devices.empty()) {
    *out->mutable_queue_pairs() = out->devices(0).queue_pairs();
    out->set_notice_ring_addr(e.devices[0].notice_ring_addr);
    out->set_notice_ring_rkey(e.devices[0].notice_ring_rkey);
  }
  if (e.kind == transport::TransportKind::kTcp) {
    out->mutable_tcp()->set_host(e.tcp.host);
    out->mutable_tcp()->set_port(e.tcp.port);
    out->mutable_tcp()->set_session_token(e.tcp.session_token);
    out->mutable_tcp()->set_sums_frames(e.tcp.sums_frames);
  }
  out->set_notice_ring_slots(e.notice_ring_slots);
  out->set_max_rd_atomic(e.max_rd_atomic);
  out->set_max_dest_rd_atomic(e.max_dest_rd_atomic);
}

absl::StatusOr<transport::LinkEndpoints> FromProto(const v1::LinkEndpoints& p) {
  transport::LinkEndpoints e;
  switch (p.transport()) {
    case v1::TRANSPORT_KIND_TCP:
      e.kind = transport::TransportKind::kTcp;
      break;
    case v1::TRANSPORT_KIND_VERBS:
      e.kind = transport::TransportKind::kVerbs;
      break;
    default:
      return absl::InvalidArgumentError("handshake names no known transport");
  }
  if (p.lanes() == 0 || p.lanes() > kMaxLanes) {
    return absl::InvalidArgumentError(
        absl::StrCat("handshake offers ", p.lanes(), " lanes; expected 1..", kMaxLanes));
  }
  e.lanes = p.lanes();
  if (e.kind == transport::TransportKind::kVerbs) {
    if (p.devices_size() == 0) {  // an older daemon: one device, in the first fields
      ASSIGN_OR_RETURN(transport::DeviceEndpoints d, DeviceFromProto(p));
      e.devices.push_back(std::move(d));
    }
    for (const v1::DeviceEndpoints& pd : p.devices()) {
      ASSIGN_OR_RETURN(transport::DeviceEndpoints d, DeviceFromProto(pd));
      d.name = pd.name();
      d.index = pd.index();
      d.peer_device = pd.peer_device();
      d.rate_mbps = pd.rate_mbps();
      e.devices.push_back(std::move(d));
    }
    e.max_rd_atomic = p.max_rd_atomic();
    e.max_dest_rd_atomic = p.max_dest_rd_atomic();
    // Refused rather than ignored: the peer would believe we use it.
    if (p.has_tcp()) return absl::InvalidArgumentError("verbs handshake carries a TCP endpoint");
  } else if (p.queue_pairs_size() != 0 || p.devices_size() != 0) {
    return absl::InvalidArgumentError("TCP handshake carries queue pairs");
  }
  if (p.has_tcp()) {
    if (p.tcp().port() > 65535) {
      return absl::InvalidArgumentError("malformed TCP endpoint in handshake");
    }
    e.tcp.host = p.tcp().host();
    e.tcp.port = static_cast<uint16_t>(p.tcp().port());
    e.tcp.session_token = p.tcp().session_token();
    e.tcp.sums_frames = p.tcp().sums_frames();
  }
  e.notice_ring_slots = p.notice_ring_slots();
  return e;
}

absl::StatusOr<engine::HandshakeMessage> FromProto(const v1::NodeIdentity& node,
                                                   const v1::LinkEndpoints& endpoints) {
  if (node.node_id().empty() || node.node_id().size() > 256 || node.address().size() > 512) {
    return absl::InvalidArgumentError("handshake carries no valid node identity");
  }
  absl::StatusOr<transport::LinkEndpoints> e = FromProto(endpoints);
  if (!e.ok()) return e.status();
  return engine::HandshakeMessage{FromProto(node), *std::move(e)};
}

void ToProto(const transport::LandingNotice& notice, v1::LandingNotice* out) {
  out->set_transfer_id(notice.transfer_id);
  out->set_offset(notice.offset);
  out->set_length(notice.length);
  out->set_blocks(notice.blocks);
  out->set_bytes(notice.bytes);
}

transport::LandingNotice FromProto(const v1::LandingNotice& notice) {
  return transport::LandingNotice{notice.transfer_id(), notice.offset(), notice.length(),
                                  notice.blocks(), notice.bytes()};
}

void ToProto(const engine::ResolvedRegion& region, v1::ResolveRegionResponse* out) {
  out->set_region_id(region.key.region_id);
  out->set_size(region.key.size);
  out->mutable_access()->set_remote_write(region.access.remote_write);
  out->mutable_access()->set_remote_read(region.access.remote_read);
  out->set_addr(region.key.addr);
  for (uint32_t rkey : region.key.rkeys) out->add_rkeys(rkey);
  for (const std::vector<uint32_t>& keys : region.key.more_rkeys) {
    v1::DeviceKeys* device = out->add_more_rkeys();
    for (uint32_t rkey : keys) device->add_rkeys(rkey);
  }
  out->set_mr_chunk_bytes(region.key.mr_chunk_bytes);
  out->set_landed_ranges(region.landed_ranges);
  out->set_key_lanes(region.key.key_lanes);
  for (uint32_t qpn : region.key.key_qpns) out->add_key_qpns(qpn);
}

engine::ResolvedRegion FromProto(const v1::ResolveRegionResponse& r) {
  engine::ResolvedRegion region;
  region.key = transport::RemoteRegion{
      r.region_id(), r.size(), r.addr(), r.mr_chunk_bytes(), {r.rkeys().begin(), r.rkeys().end()}};
  for (const v1::DeviceKeys& keys : r.more_rkeys()) {
    region.key.more_rkeys.emplace_back(keys.rkeys().begin(), keys.rkeys().end());
  }
  region.key.key_lanes = r.key_lanes();
  region.key.key_qpns.assign(r.key_qpns().begin(), r.key_qpns().end());
  region.access.remote_write = r.access().remote_write();
  region.access.remote_read = r.access().remote_read();
  region.landed_ranges = r.landed_ranges();
  return region;
}

}  // namespace xferd::service
