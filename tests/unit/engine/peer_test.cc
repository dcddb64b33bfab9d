#include "daemon/engine/peer.h"

#include <gtest/gtest.h>

namespace xferd::engine {
namespace {

struct TestLink : transport::Link {
  TestLink() : Link({"n", 1}) {}
  absl::Status Connect(const transport::PeerIdentity&, const transport::LinkEndpoints&,
                       absl::Time) override {
    return absl::OkStatus();
  }
  void Close(absl::Status reason) override { MarkBroken(std::move(reason)); }
  uint32_t lane_count() const override { return 2; }
  transport::Lane& lane(uint32_t) override { std::abort(); }
  bool ready() const override { return !broken(); }
};

std::shared_ptr<Peer> MakePeer(const std::string& node, const std::string& address) {
  return std::make_shared<Peer>(NodeIdentity{node, 1, address}, true, std::make_shared<TestLink>(),
                                transport::TransportKind::kTcp, "", 1, 2);
}

TEST(PeerDirectoryTest, FindByNodeOrAddressAndReplace) {
  PeerDirectory peers;
  auto first = MakePeer("b", "10.0.0.2:7300");
  EXPECT_EQ(peers.Install(first), nullptr);
  EXPECT_EQ(peers.Find("b"), first);
  EXPECT_EQ(peers.Find("10.0.0.2:7300"), first);
  EXPECT_EQ(peers.Find("c"), nullptr);
  auto second = MakePeer("b", "10.0.0.2:7300");
  EXPECT_EQ(peers.Install(second), first);
  EXPECT_TRUE(first->link()->broken());
  EXPECT_NE(first->link()->status().message().find("replaced"), absl::string_view::npos);
  EXPECT_EQ(peers.Find("b"), second);
  EXPECT_EQ(peers.List().size(), 1u);
  EXPECT_EQ(peers.Remove("10.0.0.2:7300"), second);
  EXPECT_TRUE(peers.List().empty());
}

TEST(PeerTest, RegionCacheAndState) {
  auto peer = MakePeer("b", "x");
  EXPECT_EQ(peer->state(), PeerState::kConnected);
  EXPECT_FALSE(peer->CachedRegion("dst"));
  peer->CacheRegion("dst", ResolvedRegion{{4, 100, 0, 0}, {true, false}});
  peer->CacheRegion("other", ResolvedRegion{{5, 100, 0, 0}, {true, false}});
  EXPECT_EQ(peer->CachedRegion("dst")->key.region_id, 4u);
  peer->ForgetRegionId(4);
  EXPECT_FALSE(peer->CachedRegion("dst"));
  peer->ForgetRegion("other");
  EXPECT_FALSE(peer->CachedRegion("other"));
  peer->link()->Close(absl::UnavailableError("gone"));
  EXPECT_EQ(peer->state(), PeerState::kBroken);
  EXPECT_EQ(peer->Info().lanes, 2u);
  EXPECT_EQ(peer->Info().last_error.message(), "gone");
}

}  // namespace
}  // namespace xferd::engine
