#include "daemon/transport/verbs/endpoint_check.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace xferd::transport::verbs {
namespace {

LinkEndpoints Verbs(uint32_t lanes, uint32_t devices = 1) {
  LinkEndpoints e;
  e.kind = TransportKind::kVerbs;
  e.lanes = lanes;
  e.notice_ring_slots = 32;
  e.max_rd_atomic = 16;
  e.max_dest_rd_atomic = 128;
  for (uint32_t d = 0; d < devices; ++d) {
    DeviceEndpoints device;
    device.name = "rxe" + std::to_string(d);
    device.index = d;
    for (uint32_t i = 0; i < lanes; ++i) {
      QueuePairEndpoint qp;
      qp.qpn = 0xffffff - i;
      qp.psn = 0xabcdef;
      qp.mtu = 4096;
      device.queue_pairs.push_back(qp);
    }
    e.devices.push_back(device);
  }
  return e;
}

TEST(EndpointCheckTest, AcceptsWhatAQueuePairCanTake) {
  EXPECT_TRUE(CheckEndpoints(Verbs(2)).ok());
  EXPECT_TRUE(CheckEndpoints(Verbs(1, kMaxDevices)).ok());
  for (uint32_t mtu : {256u, 512u, 1024u, 2048u, 4096u}) {
    LinkEndpoints e = Verbs(1);
    e.devices[0].queue_pairs[0].mtu = mtu;
    EXPECT_TRUE(CheckEndpoints(e).ok()) << mtu;
  }
  // Another transport's endpoints are the link's to refuse, naming both.
  LinkEndpoints tcp = Verbs(1);
  tcp.kind = TransportKind::kTcp;
  tcp.notice_ring_slots = 0;
  EXPECT_TRUE(CheckEndpoints(tcp).ok());
}

TEST(EndpointCheckTest, RefusesWhatItCannotTakeSayingWhat) {
  std::vector<std::pair<LinkEndpoints, std::string>> bad;
  bad.emplace_back(Verbs(1, kMaxDevices + 1), "handshake offers 33 RDMA devices; expected at most 32");
  LinkEndpoints long_name = Verbs(1);
  long_name.devices[0].name = std::string(65, 'x');
  bad.emplace_back(long_name, "malformed RDMA device in handshake");
  LinkEndpoints far_index = Verbs(1);
  far_index.devices[0].index = kMaxDevices;
  bad.emplace_back(far_index, "malformed RDMA device in handshake");
  LinkEndpoints far_partner = Verbs(1);
  far_partner.devices[0].peer_device = kMaxDevices;
  bad.emplace_back(far_partner, "malformed RDMA device in handshake");
  LinkEndpoints mismatch = Verbs(2);
  mismatch.lanes = 3;  // lanes != queue pairs
  bad.emplace_back(mismatch, "handshake has 2 queue pairs for 3 lanes");
  LinkEndpoints second_device = Verbs(2, 2);
  second_device.devices[1].queue_pairs.pop_back();
  bad.emplace_back(second_device, "handshake has 1 queue pairs for 2 lanes");
  LinkEndpoints bad_mtu = Verbs(1);
  bad_mtu.devices[0].queue_pairs[0].mtu = 1500;
  bad.emplace_back(bad_mtu, "malformed queue pair endpoint in handshake");
  LinkEndpoints big_qpn = Verbs(1);
  big_qpn.devices[0].queue_pairs[0].qpn = 1u << 24;
  bad.emplace_back(big_qpn, "malformed queue pair endpoint in handshake");
  LinkEndpoints big_psn = Verbs(1);
  big_psn.devices[0].queue_pairs[0].psn = 1u << 24;
  bad.emplace_back(big_psn, "malformed queue pair endpoint in handshake");
  for (uint32_t slots : {0u, (1u << 16) + 1}) {
    LinkEndpoints ring = Verbs(1);
    ring.notice_ring_slots = slots;
    bad.emplace_back(ring, "malformed notice ring in handshake");
  }
  for (uint32_t depth : {0u, 256u}) {
    LinkEndpoints reads_out = Verbs(1);
    reads_out.max_rd_atomic = depth;
    bad.emplace_back(reads_out, "handshake offers max_rd_atomic " + std::to_string(depth) +
                                    " and max_dest_rd_atomic 128; expected 1..255");
    LinkEndpoints reads_in = Verbs(1);
    reads_in.max_dest_rd_atomic = depth;
    bad.emplace_back(reads_in, "handshake offers max_rd_atomic 16 and max_dest_rd_atomic " +
                                   std::to_string(depth) + "; expected 1..255");
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    const absl::Status s = CheckEndpoints(bad[i].first);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << i;
    EXPECT_EQ(s.message(), bad[i].second) << i;
  }
}

}  // namespace
}  // namespace xferd::transport::verbs
