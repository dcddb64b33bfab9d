#include "daemon/transport/link_set.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace xferd::transport {
namespace {

// A link with no lanes; Close records the reason and may run `on_close`.
class TestLink final : public Link {
 public:
  explicit TestLink(std::string peer) : Link(PeerIdentity{std::move(peer)}) {}
  absl::Status Connect(const PeerIdentity&, const LinkEndpoints&, absl::Time) override {
    return absl::OkStatus();
  }
  void Close(absl::Status reason) override {
    ++closes;
    if (MarkBroken(std::move(reason)) && on_close) on_close();
  }
  uint32_t lane_count() const override { return 0; }
  Lane& lane(uint32_t) override { std::abort(); }
  bool ready() const override { return !broken(); }

  int closes = 0;
  std::function<void()> on_close;
};

TEST(LinkSetTest, CloseAllClosesEveryLiveLinkWithTheReason) {
  LinkSet set;
  auto a = std::make_shared<TestLink>("a");
  auto b = std::make_shared<TestLink>("b");
  set.Add(a);
  set.Add(b);
  set.CloseAll(absl::UnavailableError("daemon is shutting down"));
  for (const auto& link : {a, b}) {
    EXPECT_EQ(link->closes, 1) << link->peer().node_id;
    EXPECT_EQ(link->status(), absl::UnavailableError("daemon is shutting down"));
  }
  // Closing again is harmless: the first reason stays.
  set.CloseAll(absl::InternalError("device fatal"));
  EXPECT_EQ(a->status(), absl::UnavailableError("daemon is shutting down"));
}

TEST(LinkSetTest, HoldsLinksWeakly) {
  LinkSet set;
  auto kept = std::make_shared<TestLink>("kept");
  std::weak_ptr<TestLink> dropped;
  {
    auto gone = std::make_shared<TestLink>("gone");
    dropped = gone;
    set.Add(gone);
  }
  EXPECT_TRUE(dropped.expired()) << "the set must not keep a link alive";
  set.Add(kept);  // forgets the expired one on the way
  set.CloseAll(absl::UnavailableError("shutdown"));
  EXPECT_EQ(kept->closes, 1);
}

TEST(LinkSetTest, CloseRunsOutsideTheLock) {
  // A link whose Close makes another link (as a reconnect would) must not
  // deadlock on the set; the new link is not closed by this CloseAll.
  LinkSet set;
  auto first = std::make_shared<TestLink>("first");
  auto second = std::make_shared<TestLink>("second");
  first->on_close = [&] { set.Add(second); };
  set.Add(first);
  set.CloseAll(absl::UnavailableError("shutdown"));
  EXPECT_EQ(first->closes, 1);
  EXPECT_EQ(second->closes, 0);
  set.CloseAll(absl::UnavailableError("shutdown"));
  EXPECT_EQ(second->closes, 1);
}

TEST(AcceptedLanesTest, TakesTheSmallerLaneCount) {
  LinkEndpoints offer;
  offer.kind = TransportKind::kTcp;
  offer.lanes = 4;
  EXPECT_EQ(*AcceptedLanes(TransportKind::kTcp, 2, PeerIdentity{"b"}, offer), 2u);
  offer.lanes = 1;
  EXPECT_EQ(*AcceptedLanes(TransportKind::kTcp, 2, PeerIdentity{"b"}, offer), 1u);
}

TEST(AcceptedLanesTest, RefusesAnotherTransportAndNoLanes) {
  LinkEndpoints offer;
  offer.kind = TransportKind::kVerbs;
  offer.lanes = 2;
  const absl::Status other =
      AcceptedLanes(TransportKind::kTcp, 2, PeerIdentity{"b"}, offer).status();
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(other.message(),
            "peer b uses the verbs transport but this daemon uses tcp: configure the same "
            "transport on both");
  offer.lanes = 0;
  const absl::Status none =
      AcceptedLanes(TransportKind::kVerbs, 2, PeerIdentity{"b"}, offer).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(none.message(), "peer b offered 0 data lanes; a daemon offers one per poller");
}

}  // namespace
}  // namespace xferd::transport
