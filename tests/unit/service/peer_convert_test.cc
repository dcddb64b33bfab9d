#include "daemon/service/peer_convert.h"

#include <gtest/gtest.h>

namespace xferd::service {
namespace {

v1::LinkEndpoints VerbsEndpoints(int lanes) {
  v1::LinkEndpoints e;
  e.set_transport(v1::TRANSPORT_KIND_VERBS);
  e.set_lanes(lanes);
  for (int i = 0; i < lanes; ++i) {
    v1::QueuePairEndpoint* qp = e.add_queue_pairs();
    qp->set_qpn(100 + i);
    qp->set_psn(0xabcdef);
    qp->set_gid(std::string(16, '\x01'));
    qp->set_gid_index(1);
    qp->set_mtu(1024);
  }
  e.set_notice_ring_slots(64);
  e.set_max_rd_atomic(16);
  e.set_max_dest_rd_atomic(128);
  return e;
}

TEST(PeerConvertTest, RoundTripsVerbsEndpoints) {
  auto parsed = FromProto(VerbsEndpoints(2));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->kind, transport::TransportKind::kVerbs);
  // A daemon without `devices`: its one device, index 0.
  ASSERT_EQ(parsed->devices.size(), 1u);
  ASSERT_EQ(parsed->devices[0].queue_pairs.size(), 2u);
  EXPECT_EQ(parsed->devices[0].queue_pairs[1].qpn, 101u);
  EXPECT_EQ(parsed->devices[0].queue_pairs[0].gid[15], 1);
  EXPECT_EQ(parsed->devices[0].index, 0u);
  EXPECT_EQ(parsed->max_rd_atomic, 16u);
  EXPECT_EQ(parsed->max_dest_rd_atomic, 128u);
  v1::LinkEndpoints back;
  ToProto(*parsed, &back);
  // What an older daemon reads is what it sent; `devices` comes on top.
  ASSERT_EQ(back.queue_pairs_size(), 2);
  EXPECT_EQ(back.queue_pairs(1).SerializeAsString(),
            VerbsEndpoints(2).queue_pairs(1).SerializeAsString());
  ASSERT_EQ(back.devices_size(), 1);
  auto again = FromProto(back);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->devices[0].queue_pairs[1].qpn, 101u);
}

TEST(PeerConvertTest, RoundTripsSeveralDevices) {
  transport::LinkEndpoints e;
  e.kind = transport::TransportKind::kVerbs;
  e.lanes = 2;
  e.notice_ring_slots = 32;
  e.max_rd_atomic = 4;
  e.max_dest_rd_atomic = 4;
  for (uint32_t d = 0; d < 2; ++d) {
    transport::DeviceEndpoints device;
    device.name = "rxe" + std::to_string(d);
    device.index = d;
    device.peer_device = 1 - d;
    device.rate_mbps = 25000 * (d + 1);
    device.notice_ring_addr = 0x1000 * (d + 1);
    device.notice_ring_rkey = 7 + d;
    for (uint32_t i = 0; i < 2; ++i) {
      transport::QueuePairEndpoint qp;
      qp.qpn = 10 * d + i;
      qp.mtu = 1024;
      qp.notice_rkey = 0x500 + 10 * d + i;  // lane i's window on the ring
      device.queue_pairs.push_back(qp);
    }
    e.devices.push_back(device);
  }
  v1::LinkEndpoints proto;
  ToProto(e, &proto);
  // Older daemons read the first device in the first fields.
  EXPECT_EQ(proto.queue_pairs_size(), 2);
  EXPECT_EQ(proto.notice_ring_addr(), 0x1000u);
  auto parsed = FromProto(proto);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->devices.size(), 2u);
  EXPECT_EQ(parsed->devices[1].name, "rxe1");
  EXPECT_EQ(parsed->devices[1].index, 1u);
  EXPECT_EQ(parsed->devices[1].peer_device, 0u);
  EXPECT_EQ(parsed->devices[1].rate_mbps, 50000u);
  EXPECT_EQ(parsed->devices[1].notice_ring_rkey, 8u);
  EXPECT_EQ(parsed->devices[1].queue_pairs[1].qpn, 11u);
  EXPECT_EQ(parsed->devices[1].queue_pairs[1].notice_rkey, 0x50bu);
}

TEST(PeerConvertTest, RoundTripsTcpEndpoints) {
  transport::LinkEndpoints e;
  e.kind = transport::TransportKind::kTcp;
  e.lanes = 4;
  e.tcp = transport::TcpEndpoint{"10.0.0.1", 7301, std::string(16, 'k'), /*sums_frames=*/true};
  v1::LinkEndpoints proto;
  ToProto(e, &proto);
  auto parsed = FromProto(proto);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->tcp.host, "10.0.0.1");
  EXPECT_EQ(parsed->tcp.port, 7301);
  EXPECT_EQ(parsed->tcp.session_token, std::string(16, 'k'));
  EXPECT_TRUE(parsed->tcp.sums_frames);
  // A daemon that predates SUMS frames sends no such field.
  proto.mutable_tcp()->clear_sums_frames();
  parsed = FromProto(proto);
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->tcp.sums_frames);
}

// What the domain types cannot hold. The limits of queue pairs, devices and
// the notice ring are the transport's (tests/unit/transport/endpoint_check_test.cc).
TEST(PeerConvertTest, RejectsMalformedEndpoints) {
  std::vector<std::pair<v1::LinkEndpoints, std::string>> bad;
  bad.emplace_back(VerbsEndpoints(0), "handshake offers 0 lanes; expected 1..256");
  bad.emplace_back(VerbsEndpoints(kMaxLanes + 1), "handshake offers 257 lanes; expected 1..256");
  v1::LinkEndpoints short_gid = VerbsEndpoints(1);
  short_gid.mutable_queue_pairs(0)->set_gid("short");
  bad.emplace_back(short_gid, "malformed queue pair endpoint in handshake");
  v1::LinkEndpoints wide_gid_index = VerbsEndpoints(1);
  wide_gid_index.mutable_queue_pairs(0)->set_gid_index(256);
  bad.emplace_back(wide_gid_index, "malformed queue pair endpoint in handshake");
  v1::LinkEndpoints wide_lid = VerbsEndpoints(1);
  wide_lid.mutable_queue_pairs(0)->set_lid(0x10000);
  bad.emplace_back(wide_lid, "malformed queue pair endpoint in handshake");
  v1::LinkEndpoints device_gid = VerbsEndpoints(1);  // the same check for `devices`
  *device_gid.add_devices()->add_queue_pairs() = short_gid.queue_pairs(0);
  bad.emplace_back(device_gid, "malformed queue pair endpoint in handshake");
  v1::LinkEndpoints unknown;
  unknown.set_lanes(1);
  bad.emplace_back(unknown, "handshake names no known transport");
  v1::LinkEndpoints tcp_with_qps = VerbsEndpoints(1);
  tcp_with_qps.set_transport(v1::TRANSPORT_KIND_TCP);
  bad.emplace_back(tcp_with_qps, "TCP handshake carries queue pairs");
  v1::LinkEndpoints verbs_with_tcp = VerbsEndpoints(1);  // found by handshake_fuzzer
  verbs_with_tcp.mutable_tcp()->set_port(7301);
  bad.emplace_back(verbs_with_tcp, "verbs handshake carries a TCP endpoint");
  v1::LinkEndpoints bad_port;
  bad_port.set_transport(v1::TRANSPORT_KIND_TCP);
  bad_port.set_lanes(1);
  bad_port.mutable_tcp()->set_port(70000);
  bad.emplace_back(bad_port, "malformed TCP endpoint in handshake");
  for (size_t i = 0; i < bad.size(); ++i) {
    const absl::Status s = FromProto(bad[i].first).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << i;
    EXPECT_EQ(s.message(), bad[i].second) << i;
  }
}

// Values the domain types hold pass the conversion as they are, for the
// transport to judge: a 25-bit QPN, an MTU of 1500, no notice slots.
TEST(PeerConvertTest, LeavesTransportLimitsToTheTransport) {
  v1::LinkEndpoints e = VerbsEndpoints(1);
  e.mutable_queue_pairs(0)->set_qpn(1u << 24);
  e.mutable_queue_pairs(0)->set_mtu(1500);
  e.set_notice_ring_slots(0);
  auto parsed = FromProto(e);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->devices[0].queue_pairs[0].qpn, 1u << 24);
  EXPECT_EQ(parsed->devices[0].queue_pairs[0].mtu, 1500u);
  EXPECT_EQ(parsed->notice_ring_slots, 0u);
}

TEST(PeerConvertTest, HandshakeNeedsAnIdentity) {
  v1::NodeIdentity node;
  EXPECT_FALSE(FromProto(node, VerbsEndpoints(1)).ok());
  node.set_node_id("b");
  node.set_incarnation(9);
  node.set_address("10.0.0.2:7300");
  auto message = FromProto(node, VerbsEndpoints(1));
  ASSERT_TRUE(message.ok());
  EXPECT_EQ(message->node.incarnation, 9u);
  EXPECT_EQ(message->node.address, "10.0.0.2:7300");
}

TEST(PeerConvertTest, ResolvedRegionRoundTrip) {
  engine::ResolvedRegion region{{7, 4096, 0xdeadbeef000, 1 << 20, {0x1234, 0x5678}}, {true, false}};
  v1::ResolveRegionResponse proto;
  ToProto(region, &proto);
  const engine::ResolvedRegion back = FromProto(proto);
  EXPECT_EQ(back.key.region_id, 7u);
  EXPECT_EQ(back.key.addr, 0xdeadbeef000u);
  EXPECT_EQ(back.key.rkeys, (std::vector<uint32_t>{0x1234, 0x5678}));
  EXPECT_EQ(back.key.mr_chunk_bytes, 1u << 20);
  EXPECT_EQ(back.key.key_lanes, 0u);
  EXPECT_TRUE(back.access.remote_write);
  EXPECT_FALSE(back.access.remote_read);
}

// Memory windows: keys per lane, lane-major, and how many lanes they cover.
TEST(PeerConvertTest, ResolvedRegionWithPerLaneKeys) {
  engine::ResolvedRegion region{{7, 4096, 0xdeadbeef000, 4096, {0x1101, 0x2201}}, {true, true}};
  region.key.key_lanes = 2;
  region.key.key_qpns = {0x11, 0x12};
  v1::ResolveRegionResponse proto;
  ToProto(region, &proto);
  EXPECT_EQ(proto.key_lanes(), 2u);
  const engine::ResolvedRegion back = FromProto(proto);
  EXPECT_EQ(back.key.key_lanes, 2u);
  EXPECT_EQ(back.key.lane_rkeys(0, 1)[0], 0x2201u);
  EXPECT_EQ(back.key.key_qpns, (std::vector<uint32_t>{0x11, 0x12}));
}

}  // namespace
}  // namespace xferd::service
