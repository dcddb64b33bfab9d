#include "daemon/memory/landed_events.h"

#include <gtest/gtest.h>

namespace xferd::memory {
namespace {

struct Recorder : LandedWatcher {
  std::vector<LandedEvent> events;
  int closed = 0;
  void OnLanded(const LandedEvent& e) override { events.push_back(e); }
  void OnRegionClosed() override { ++closed; }
};

TEST(LandedEventHubTest, NumbersEventsAndFansOut) {
  LandedEventHub hub;
  Recorder a, b;
  ASSERT_TRUE(hub.Subscribe(&a));
  hub.Publish(LandedEvent{0, 10, "peer", 1});
  ASSERT_TRUE(hub.Subscribe(&b));
  hub.Publish(LandedEvent{10, 10, "peer", 2});
  ASSERT_EQ(a.events.size(), 2u);
  EXPECT_EQ(a.events[0].sequence, 1u);
  EXPECT_EQ(a.events[1].sequence, 2u);
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(b.events[0].offset, 10u);
  hub.Unsubscribe(&a);
  hub.Publish(LandedEvent{20, 1, "peer", 3});
  EXPECT_EQ(a.events.size(), 2u);
  EXPECT_EQ(hub.published(), 3u);
}

TEST(LandedEventHubTest, CloseTellsWatchersOnceAndRefusesNewOnes) {
  LandedEventHub hub;
  Recorder a;
  hub.Subscribe(&a);
  hub.Close();
  hub.Close();
  EXPECT_EQ(a.closed, 1);
  Recorder late;
  EXPECT_FALSE(hub.Subscribe(&late));
  hub.Publish(LandedEvent{});
  EXPECT_TRUE(a.events.empty());
}

}  // namespace
}  // namespace xferd::memory
