// Region keys that work only on the link they were granted on (type-2
// memory windows), on a real RDMA device (Soft-RoCE in the VM suite;
// skipped where there is none). Daemon a owns the regions; b and c are its
// peers, each with its own link. c posting with the keys a granted b (as a
// peer that guessed or sniffed them would) must get a remote access error and
// write nothing; so must b with keys of a link it no longer has, or of a
// grant a revoked (its ACL left b out), and anyone with the MR's own key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "daemon/transport/verbs/verbs_registration.h"
#include "tests/transport/verbs_nodes.h"

namespace xferd::transport::testing {
namespace {

constexpr uint64_t kSize = 1 << 20;
constexpr uint32_t kBlock = 4096;
constexpr memory::Access kWritable{/*remote_write=*/true, /*remote_read=*/false};

std::vector<std::byte> Bytes(const memory::Region& r) {
  return std::vector<std::byte>(r.data(), r.data() + r.size());
}

// A refusal by the peer's NIC: the op fails, and its link with it.
void ExpectRemoteAccessError(const absl::Status& status) {
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_NE(status.message().find("remote access error"), absl::string_view::npos) << status;
}

// Keys as a peer that ignores which queue pairs they name would post them
// (a hostile one, not running this daemon): only the NIC stands in its way.
RemoteRegion Untagged(RemoteRegion keys) {
  keys.key_qpns.clear();
  return keys;
}

class VerbsWindowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (auto [node, name] : {std::pair{&a_, "a"}, {&b_, "b"}, {&c_, "c"}}) {
      absl::StatusOr<VerbsNode*> added = nodes_.Add(name);
      if (!added.ok()) GTEST_SKIP() << "no RDMA device: " << added.status();
      *node = *added;
    }
    absl::StatusOr<LinkEnds> ab = nodes_.Connect(*b_, *a_);
    absl::StatusOr<LinkEnds> ac = nodes_.Connect(*c_, *a_);
    ASSERT_TRUE(ab.ok()) << ab.status();
    ASSERT_TRUE(ac.ok()) << ac.status();
    ab_ = *std::move(ab);
    ac_ = *std::move(ac);
    dst_ = nodes_.Register(*a_, "dst", kSize, kWritable);
    src_b_ = nodes_.Register(*b_, "src", kSize, {});
    src_c_ = nodes_.Register(*c_, "src", kSize, {});
    ASSERT_TRUE(dst_ != nullptr && src_b_ != nullptr && src_c_ != nullptr);
    std::memset(dst_->data(), 0x11, kSize);
    std::memset(src_b_->data(), 0xbb, kSize);
    std::memset(src_c_->data(), 0xcc, kSize);
  }

  // What a grants the peer at the other end of `ends` (a is the responder).
  RemoteRegion Keys(const LinkEnds& ends) {
    absl::StatusOr<RemoteRegion> key = nodes_.Grant(*a_, *ends.responder, *dst_);
    EXPECT_TRUE(key.ok()) << key.status();
    return key.ok() ? *std::move(key) : RemoteRegion{};
  }

  bool Holds(uint64_t offset, uint8_t value) const {
    return std::all_of(dst_->data() + offset, dst_->data() + offset + kBlock,
                       [&](std::byte b) { return b == std::byte{value}; });
  }

  VerbsNodes nodes_;
  VerbsNode* a_ = nullptr;
  VerbsNode* b_ = nullptr;
  VerbsNode* c_ = nullptr;
  LinkEnds ab_, ac_;  // b's link with a, c's; the initiators are b's and c's ends
  std::shared_ptr<memory::Region> dst_, src_b_, src_c_;
};

TEST_F(VerbsWindowsTest, AnotherPeersKeyIsRefusedAndWritesNothing) {
  const RemoteRegion for_b = Keys(ab_);
  const RemoteRegion for_c = Keys(ac_);
  EXPECT_EQ(for_b.key_lanes, VerbsNodes::kPollers);
  EXPECT_NE(for_b.rkeys, for_c.rkeys);
  // Each with its own keys: both land.
  ASSERT_TRUE(nodes_.Write(*b_, *ab_.initiator, 0, *src_b_, for_b, 0, kBlock).ok());
  ASSERT_TRUE(nodes_.Write(*c_, *ac_.initiator, 1, *src_c_, for_c, kBlock, kBlock).ok());
  EXPECT_TRUE(Holds(0, 0xbb));
  EXPECT_TRUE(Holds(kBlock, 0xcc));
  const std::vector<std::byte> before = Bytes(*dst_);
  // This daemon does not even post them: they name b's queue pairs.
  const absl::Status local = nodes_.Write(*c_, *ac_.initiator, 0, *src_c_, for_b, 65536, kBlock);
  EXPECT_EQ(local.code(), absl::StatusCode::kUnavailable) << local;
  EXPECT_FALSE(ac_.initiator->broken());
  // c with b's keys, on either lane: refused by a's NIC, nothing written.
  ExpectRemoteAccessError(
      nodes_.Write(*c_, *ac_.initiator, 0, *src_c_, Untagged(for_b), 65536, kBlock));
  EXPECT_EQ(Bytes(*dst_), before);
  EXPECT_TRUE(ac_.initiator->broken());
  // b's own keys still work: the refusal broke c's link, not b's.
  ASSERT_TRUE(nodes_.Write(*b_, *ab_.initiator, 1, *src_b_, for_b, 65536, kBlock).ok());
  EXPECT_TRUE(Holds(65536, 0xbb));
}

// A window is bound to one queue pair: lane 1's key on lane 0 fails too.
TEST_F(VerbsWindowsTest, EachLaneHasItsOwnKeys) {
  RemoteRegion swapped = Keys(ab_);
  const size_t half = swapped.rkeys.size() / 2;
  std::rotate(swapped.rkeys.begin(), swapped.rkeys.begin() + half, swapped.rkeys.end());
  const std::vector<std::byte> before = Bytes(*dst_);
  ExpectRemoteAccessError(nodes_.Write(*b_, *ab_.initiator, 0, *src_b_, swapped, 0, kBlock));
  EXPECT_EQ(Bytes(*dst_), before);
}

// The MRs under the windows grant no remote access of their own.
TEST_F(VerbsWindowsTest, TheMemoryRegistrationsOwnKeyReachesNothing) {
  const RemoteRegion granted = Keys(ab_);
  RemoteRegion mr = granted;
  mr.key_lanes = 0;
  mr.rkeys = static_cast<const verbs::VerbsRegistration&>(*dst_->registration()).rkeys(0);
  const std::vector<std::byte> before = Bytes(*dst_);
  ExpectRemoteAccessError(nodes_.Write(*b_, *ab_.initiator, 0, *src_b_, mr, 0, kBlock));
  EXPECT_EQ(Bytes(*dst_), before);
}

// After a disconnect and a new handshake, keys of the old link are void.
TEST_F(VerbsWindowsTest, AKeyOfAPreviousLinkIsRefused) {
  const RemoteRegion old_keys = Keys(ab_);
  ASSERT_TRUE(nodes_.Write(*b_, *ab_.initiator, 0, *src_b_, old_keys, 0, kBlock).ok());
  ab_.responder->Close(absl::UnavailableError("disconnected"));
  ab_.initiator->Close(absl::UnavailableError("disconnected"));
  absl::StatusOr<LinkEnds> again = nodes_.Connect(*b_, *a_);
  ASSERT_TRUE(again.ok()) << again.status();
  std::memset(src_b_->data(), 0xb2, kSize);
  const std::vector<std::byte> before = Bytes(*dst_);
  ExpectRemoteAccessError(
      nodes_.Write(*b_, *again->initiator, 0, *src_b_, Untagged(old_keys), 0, kBlock));
  EXPECT_EQ(Bytes(*dst_), before);
  // The new link's own grant works (on a third link: the refusal broke this one).
  absl::StatusOr<LinkEnds> third = nodes_.Connect(*b_, *a_);
  ASSERT_TRUE(third.ok()) << third.status();
  const RemoteRegion fresh = Keys(*third);
  ASSERT_TRUE(nodes_.Write(*b_, *third->initiator, 0, *src_b_, fresh, 0, kBlock).ok());
  EXPECT_TRUE(Holds(0, 0xb2));
}

// What an ACL change leaving b out does (Engine::SetRegionAcl): b's keys
// stop working at once; c's, granted on its own link, still do.
TEST_F(VerbsWindowsTest, RevokedKeysAreRefused) {
  const RemoteRegion for_b = Keys(ab_);
  const RemoteRegion for_c = Keys(ac_);
  ASSERT_TRUE(nodes_.Write(*b_, *ab_.initiator, 0, *src_b_, for_b, 0, kBlock).ok());
  a_->transport->RevokeRegion(*dst_, ab_.responder.get());
  const std::vector<std::byte> before = Bytes(*dst_);
  ExpectRemoteAccessError(nodes_.Write(*b_, *ab_.initiator, 1, *src_b_, for_b, kBlock, kBlock));
  EXPECT_EQ(Bytes(*dst_), before);
  ASSERT_TRUE(nodes_.Write(*c_, *ac_.initiator, 0, *src_c_, for_c, kBlock, kBlock).ok());
  EXPECT_TRUE(Holds(kBlock, 0xcc));
}

// The notice ring a peer writes landing notices into: its per-lane keys work
// on that peer's link only, and the ring's MR has no remote key at all.
TEST_F(VerbsWindowsTest, NoticeRingKeysAreBoundToTheirLink) {
  const DeviceEndpoints& a_to_b = ab_.answer.devices.at(0);
  EXPECT_EQ(a_to_b.notice_ring_rkey, 0u);
  ASSERT_NE(a_to_b.queue_pairs.at(0).notice_rkey, 0u);
  // c aims at lane 0's slots of a's ring for b, with the key a gave b.
  RemoteRegion ring{0, kBlock, a_to_b.notice_ring_addr, kBlock, {a_to_b.queue_pairs[0].notice_rkey}};
  ExpectRemoteAccessError(nodes_.Write(*c_, *ac_.initiator, 0, *src_c_, ring, 0, 64));
}

// Windows go with their link (before its queue pairs) and with their region.
TEST_F(VerbsWindowsTest, WindowsAreReleasedWithTheLinkAndTheRegion) {
  const uint32_t rings = a_->transport->stats().memory_windows;  // a's two rings
  EXPECT_EQ(rings, 2 * VerbsNodes::kPollers);
  Keys(ab_);
  Keys(ac_);
  Keys(ac_);  // the same grant again: the same windows
  EXPECT_EQ(a_->transport->stats().memory_windows, rings + 2 * VerbsNodes::kPollers);
  // Stats report them by device, against the device's limit.
  const TransportStats stats = a_->transport->stats();
  ASSERT_EQ(stats.devices.size(), 1u);
  EXPECT_EQ(stats.devices[0].memory_windows, stats.memory_windows);
  EXPECT_GE(stats.devices[0].max_memory_windows, stats.memory_windows);
  ab_.responder->Close(absl::UnavailableError("disconnected"));
  EXPECT_EQ(a_->transport->stats().memory_windows, rings);  // b's ring and grant
  a_->transport->RevokeRegion(*dst_, nullptr);  // as deregistration does
  EXPECT_EQ(a_->transport->stats().memory_windows, VerbsNodes::kPollers);  // c's ring
}

// Without memory windows (transport.verbs_memory_windows = false) any queue
// pair of a's protection domain takes a key, whoever it was given to: what
// the windows above prevent.
TEST(VerbsWithoutWindowsTest, AnyQueuePairTakesAnotherPeersKey) {
  VerbsNodes nodes;
  absl::StatusOr<VerbsNode*> a = nodes.Add("a", /*memory_windows=*/false);
  if (!a.ok()) GTEST_SKIP() << "no RDMA device: " << a.status();
  VerbsNode* b = *nodes.Add("b", false);
  VerbsNode* c = *nodes.Add("c", false);
  absl::StatusOr<LinkEnds> ab = nodes.Connect(*b, **a);
  absl::StatusOr<LinkEnds> ac = nodes.Connect(*c, **a);
  ASSERT_TRUE(ab.ok() && ac.ok());
  auto dst = nodes.Register(**a, "dst", kSize, kWritable);
  auto src = nodes.Register(*c, "src", kSize, {});
  std::memset(src->data(), 0xcc, kSize);
  absl::StatusOr<RemoteRegion> for_b = nodes.Grant(**a, *ab->responder, *dst);
  ASSERT_TRUE(for_b.ok()) << for_b.status();
  EXPECT_EQ(for_b->key_lanes, 0u);
  ASSERT_TRUE(nodes.Write(*c, *ac->initiator, 0, *src, *for_b, 0, kBlock).ok());
  EXPECT_EQ(dst->data()[0], std::byte{0xcc});
}

}  // namespace
}  // namespace xferd::transport::testing
