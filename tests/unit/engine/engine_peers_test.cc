#include <gtest/gtest.h>

#include "tests/unit/engine/engine_harness.h"

namespace xferd::testing {
namespace {

using engine::PeerState;
using engine::TransferState;

// Each test connects the engines itself.
class EnginePeersTest : public TwoEngineTest {
 protected:
  EnginePeersTest() : TwoEngineTest(EngineConfig{}, /*connect=*/false) {}
};

TEST_F(EnginePeersTest, ConnectShowsOnBothSidesAndIsIdempotent) {
  auto peer = h_.Connect(*a_, *b_);
  ASSERT_TRUE(peer.ok()) << peer.status();
  EXPECT_EQ(peer->node.node_id, "b");
  EXPECT_TRUE(peer->outbound);
  EXPECT_EQ(peer->state, PeerState::kConnected);
  auto again = h_.Connect(*a_, *b_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->connected_at, peer->connected_at);  // the same link
  auto on_b = b_->engine->ListPeers();
  ASSERT_EQ(on_b.size(), 1u);
  EXPECT_EQ(on_b[0].node.node_id, "a");
  EXPECT_FALSE(on_b[0].outbound);
}

TEST_F(EnginePeersTest, ConnectErrors) {
  std::promise<absl::StatusOr<engine::PeerInfo>> done;
  a_->engine->ConnectPeer("addr-nowhere", absl::Seconds(1),
                          [&](auto r) { done.set_value(std::move(r)); });
  EXPECT_EQ(done.get_future().get().status().code(), absl::StatusCode::kUnavailable);
  std::promise<absl::StatusOr<engine::PeerInfo>> self;
  a_->engine->ConnectPeer("addr-a", absl::Seconds(1),
                          [&](auto r) { self.set_value(std::move(r)); });
  absl::Status s = self.get_future().get().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("cannot connect to itself"), absl::string_view::npos) << s;
  EXPECT_TRUE(a_->engine->ListPeers().empty());
}

// Endpoints the transport cannot take (Transport::CheckEndpoints) end the
// handshake on whichever side checks them, with the transport's status, and
// no peer is installed there.
TEST_F(EnginePeersTest, EndpointsTheTransportRefusesEndTheHandshake) {
  const absl::Status refused = absl::InvalidArgumentError("malformed notice ring in handshake");
  b_->transport->refuse_endpoints = refused;  // the responder checks the offer
  absl::Status s = h_.Connect(*a_, *b_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("malformed notice ring in handshake"), absl::string_view::npos) << s;
  EXPECT_TRUE(a_->engine->ListPeers().empty());
  EXPECT_TRUE(b_->engine->ListPeers().empty());
  b_->transport->refuse_endpoints = absl::OkStatus();
  a_->transport->refuse_endpoints = refused;  // the initiator checks the answer
  s = h_.Connect(*a_, *b_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("malformed notice ring in handshake"), absl::string_view::npos) << s;
  EXPECT_TRUE(a_->engine->ListPeers().empty());
  a_->transport->refuse_endpoints = absl::OkStatus();
  ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  // A rejoin offer b's transport refuses: b accepts nothing.
  b_->transport->refuse_endpoints = refused;
  EXPECT_EQ(b_->engine->AcceptRejoin("a", a_->engine->self().incarnation, {}).status(), refused);
  EXPECT_EQ(b_->transport->rejoins().accepts.load(), 0u);
}

// A broken share of a live link (the fake models one device pair) comes
// back through the peer service: offered by the end that saw it break,
// accepted and committed by the other, with no new handshake.
TEST_F(EnginePeersTest, ABrokenDevicePairRejoinsTheLiveLink) {
  auto peer = h_.Connect(*a_, *b_);
  ASSERT_TRUE(peer.ok()) << peer.status();
  FakeRejoins& on_a = a_->transport->rejoins();
  on_a.broken.store(true);
  ASSERT_TRUE(WaitUntil([&] { return b_->transport->rejoins().commits.load() > 0; }));
  EXPECT_FALSE(on_a.broken.load());
  EXPECT_EQ(on_a.offers.load(), 1u);
  EXPECT_EQ(on_a.rejoined.load(), 1u);
  EXPECT_EQ(b_->transport->rejoins().accepts.load(), 1u);
  EXPECT_EQ(b_->transport->rejoins().commits.load(), 1u);
  EXPECT_EQ(b_->transport->rejoins().offers.load(), 0u);  // b saw nothing break
  // The same link carries on.
  ASSERT_EQ(a_->engine->ListPeers().size(), 1u);
  EXPECT_EQ(a_->engine->ListPeers()[0].connected_at, peer->connected_at);
  EXPECT_EQ(Write(256 << 10).state, TransferState::kDone);
}

TEST_F(EnginePeersTest, RejoinNeedsALiveLinkWithTheCaller) {
  ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  EXPECT_EQ(b_->engine->AcceptRejoin("nobody", 1, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(b_->engine->OnCommitRejoin("a", 999, {0}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(b_->transport->rejoins().commits.load(), 0u);
}

TEST_F(EnginePeersTest, DisconnectFailsTransfersInFlight) {
  ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  a_->transport->HoldCompletions(true);
  auto t = (*h_.Submit(*a_, {Spec("src", "b", "dst", 1 << 20)}))[0];
  auto failed = a_->engine->DisconnectPeer("b", a_->engine->tenants().Default());
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(*failed, 1u);
  const engine::TransferInfo info = h_.Wait(t);
  EXPECT_EQ(info.state, TransferState::kFailed);
  EXPECT_EQ(info.error.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(info.error.message().find("disconnected"), absl::string_view::npos);
  a_->transport->HoldCompletions(false);
  EXPECT_TRUE(a_->engine->ListPeers().empty());
  EXPECT_EQ(a_->engine->DisconnectPeer("b", a_->engine->tenants().Default()).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(EnginePeersTest, GoodbyeBreaksThePeerAndTheNextWriteReconnects) {
  ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  const absl::Time first_link = a_->engine->ListPeers()[0].connected_at;
  b_->engine->SayGoodbye("maintenance", absl::Now() + absl::Seconds(1));
  auto peers = a_->engine->ListPeers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].state, PeerState::kBroken);
  EXPECT_NE(peers[0].last_error.message().find("maintenance"), absl::string_view::npos);
  // Writing to a broken peer handshakes again first.
  EXPECT_EQ(Write(4096).state, TransferState::kDone);
  peers = a_->engine->ListPeers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].state, PeerState::kConnected);
  EXPECT_GT(peers[0].connected_at, first_link);
}

TEST_F(EnginePeersTest, AGonePeerFailsWritesWithBothReasons) {
  ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  b_->engine->SayGoodbye("power off", absl::Now() + absl::Seconds(1));
  h_.rpc().Remove("addr-b");  // and it does not come back
  absl::Status s = h_.Submit(*a_, {Spec("src", "b", "dst", 4096)}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("power off"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("connecting it again failed"), absl::string_view::npos) << s;
}

TEST_F(EnginePeersTest, LocalMistakesAreReportedBeforeAskingThePeer) {
  ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  h_.rpc().Remove("addr-b");  // the peer would not even answer
  absl::Status s = h_.Submit(*a_, {Spec("nope", "b", "unknown-dst", 4096)}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("source region 'nope'"), absl::string_view::npos) << s;
}

TEST_F(EnginePeersTest, AHandshakeFromTheSameNodeReplacesTheOldLink) {
  ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  a_->transport->HoldCompletions(true);
  auto t = (*h_.Submit(*a_, {Spec("src", "b", "dst", 1 << 20)}))[0];
  // b forgets a and handshakes again (as after a restart): a's old link to b
  // is replaced and the transfer that used it fails.
  ASSERT_TRUE(b_->engine->DisconnectPeer("a", b_->engine->tenants().Default()).ok());
  ASSERT_TRUE(h_.Connect(*b_, *a_).ok());
  const engine::TransferInfo info = h_.Wait(t);
  EXPECT_EQ(info.state, TransferState::kFailed);
  EXPECT_EQ(info.error.code(), absl::StatusCode::kUnavailable);
  a_->transport->HoldCompletions(false);
  auto peers = a_->engine->ListPeers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_FALSE(peers[0].outbound);
  EXPECT_EQ(peers[0].state, PeerState::kConnected);
}

// A goodbye names the node, not the link: one still on its way when the
// same node handshakes again must not end the new link. b disconnects a and
// at once connects it again while its goodbye is slow to arrive.
TEST_F(EnginePeersTest, AReconnectWaitsForTheGoodbyeOfTheLinkBefore) {
  ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  h_.rpc().SetGoodbyeDelay(absl::Milliseconds(200));
  ASSERT_TRUE(b_->engine->DisconnectPeer("a", b_->engine->tenants().Default()).ok());
  ASSERT_TRUE(h_.Connect(*b_, *a_).ok());
  ASSERT_TRUE(WaitUntil([&] { return h_.rpc().goodbyes() == 1; })) << "the goodbye never landed";
  auto peers = a_->engine->ListPeers();
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].state, PeerState::kConnected) << "the old link's goodbye ended the new one";
}

// A 4 KiB region "private" that peers may write, if `acl` admits them.
memory::RegionSpec PrivateRegion(std::vector<std::string> acl) {
  memory::RegionSpec spec;
  spec.name = "private";
  spec.size = 4096;
  spec.access.remote_write = true;
  spec.allowed_peers = std::move(acl);
  return spec;
}

TEST_F(EnginePeersTest, ResolutionHonoursTheAcl) {
  ASSERT_TRUE(h_.Register(*b_, PrivateRegion({"c"})).ok());
  ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  absl::Status s = h_.Submit(*a_, {Spec("src", "b", "private", 4096)}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("ACL"), absl::string_view::npos);
}

// How a write of 4 KiB from `from` into b's `region` ends.
absl::StatusCode WriteOutcome(EngineHarness& h, Node& from, const std::string& region) {
  auto submitted = h.Submit(from, {Spec("src", "b", region, 4096)});
  if (!submitted.ok()) return submitted.status().code();
  return h.Wait((*submitted)[0]).error.code();
}

absl::StatusOr<std::shared_ptr<memory::Region>> SetAcl(Node& node, const std::string& region,
                                                       std::vector<std::string> peers) {
  std::promise<absl::StatusOr<std::shared_ptr<memory::Region>>> done;
  node.engine->SetRegionAcl(region, node.engine->tenants().Default(), std::move(peers),
                            [&](auto r) { done.set_value(r); });
  return done.get_future().get();
}

TEST_F(EnginePeersTest, AnAclChangeTakesTheKeysBack) {
  ASSERT_TRUE(h_.Register(*b_, PrivateRegion({"a"})).ok());
  ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  EXPECT_EQ(WriteOutcome(h_, *a_, "private"), absl::StatusCode::kOk);
  auto changed = SetAcl(*b_, "private", {"c"});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ((*changed)->allowed_peers(), std::vector<std::string>{"c"});
  // a was told before the change answered: its write resolves, and is refused.
  auto refused = h_.Submit(*a_, {Spec("src", "b", "private", 4096)});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  // Let back in: it resolves afresh and writes.
  ASSERT_TRUE(SetAcl(*b_, "private", {"c", "a"}).ok());
  EXPECT_EQ(WriteOutcome(h_, *a_, "private"), absl::StatusCode::kOk);
  EXPECT_EQ(SetAcl(*b_, "none", {}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(SetAcl(*b_, "private", {""}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(EnginePeersTest, ResolveRequiresTheCurrentLink) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  EXPECT_EQ(b_->engine->ResolveForPeer("a", 1, 0, "dst", deadline).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(h_.Connect(*a_, *b_).ok());
  EXPECT_TRUE(b_->engine->ResolveForPeer("a", 1, 0, "dst", deadline).ok());
  EXPECT_EQ(b_->engine->ResolveForPeer("a", 999, 0, "dst", deadline).status().code(),
            absl::StatusCode::kFailedPrecondition);  // a stale incarnation
  // Keys for a link b does not have (an old one, replaced): they would be
  // bound to the wrong queue pairs, so none are handed out.
  EXPECT_EQ(b_->engine->ResolveForPeer("a", 1, 12345, "dst", deadline).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace xferd::testing
