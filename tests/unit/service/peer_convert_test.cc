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
  ASSERT_EQ(parsed->queue_pairs.size(), 2u);
  EXPECT_EQ(parsed->queue_pairs[1].qpn, 101u);
  EXPECT_EQ(parsed->queue_pairs[0].gid[15], 1);
  EXPECT_EQ(parsed->max_rd_atomic, 16u);
  EXPECT_EQ(parsed->max_dest_rd_atomic, 128u);
  v1::LinkEndpoints back;
  ToProto(*parsed, &back);
  EXPECT_EQ(back.SerializeAsString(), VerbsEndpoints(2).SerializeAsString());
}

TEST(PeerConvertTest, RoundTripsTcpEndpoints) {
  transport::LinkEndpoints e;
  e.kind = transport::TransportKind::kTcp;
  e.lanes = 4;
  e.tcp = transport::TcpEndpoint{"10.0.0.1", 7301, std::string(16, 'k')};
  v1::LinkEndpoints proto;
  ToProto(e, &proto);
  auto parsed = FromProto(proto);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->tcp.host, "10.0.0.1");
  EXPECT_EQ(parsed->tcp.port, 7301);
  EXPECT_EQ(parsed->tcp.session_token, std::string(16, 'k'));
}

TEST(PeerConvertTest, RejectsMalformedEndpoints) {
  std::vector<v1::LinkEndpoints> bad;
  bad.push_back(VerbsEndpoints(0));              // no lanes
  bad.push_back(VerbsEndpoints(kMaxLanes + 1));  // too many
  v1::LinkEndpoints mismatch = VerbsEndpoints(2);
  mismatch.set_lanes(3);  // lanes != queue pairs
  bad.push_back(mismatch);
  v1::LinkEndpoints short_gid = VerbsEndpoints(1);
  short_gid.mutable_queue_pairs(0)->set_gid("short");
  bad.push_back(short_gid);
  v1::LinkEndpoints bad_mtu = VerbsEndpoints(1);
  bad_mtu.mutable_queue_pairs(0)->set_mtu(1500);
  bad.push_back(bad_mtu);
  v1::LinkEndpoints big_qpn = VerbsEndpoints(1);
  big_qpn.mutable_queue_pairs(0)->set_qpn(1u << 24);
  bad.push_back(big_qpn);
  v1::LinkEndpoints no_ring = VerbsEndpoints(1);
  no_ring.set_notice_ring_slots(0);
  bad.push_back(no_ring);
  for (uint32_t bad_depth : {0u, 256u}) {
    v1::LinkEndpoints reads_out = VerbsEndpoints(1);
    reads_out.set_max_rd_atomic(bad_depth);
    bad.push_back(reads_out);
    v1::LinkEndpoints reads_in = VerbsEndpoints(1);
    reads_in.set_max_dest_rd_atomic(bad_depth);
    bad.push_back(reads_in);
  }
  v1::LinkEndpoints unknown;
  unknown.set_lanes(1);
  bad.push_back(unknown);  // no transport
  v1::LinkEndpoints tcp_with_qps = VerbsEndpoints(1);
  tcp_with_qps.set_transport(v1::TRANSPORT_KIND_TCP);
  bad.push_back(tcp_with_qps);
  v1::LinkEndpoints verbs_with_tcp = VerbsEndpoints(1);  // found by handshake_fuzzer
  verbs_with_tcp.mutable_tcp()->set_port(7301);
  bad.push_back(verbs_with_tcp);
  v1::LinkEndpoints bad_port;
  bad_port.set_transport(v1::TRANSPORT_KIND_TCP);
  bad_port.set_lanes(1);
  bad_port.mutable_tcp()->set_port(70000);
  bad.push_back(bad_port);
  for (size_t i = 0; i < bad.size(); ++i) {
    EXPECT_EQ(FromProto(bad[i]).status().code(), absl::StatusCode::kInvalidArgument) << i;
  }
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
  EXPECT_TRUE(back.access.remote_write);
  EXPECT_FALSE(back.access.remote_read);
}

}  // namespace
}  // namespace xferd::service
