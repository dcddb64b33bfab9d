#include "daemon/memory/landed_events.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace xferd::memory {
namespace {

using ReadResult = LandedEventHub::ReadResult;

struct Counter : LandedWatcher {
  std::atomic<uint64_t> news{0};
  void OnLandedNews() override { ++news; }
};

TEST(LandedEventHubTest, NumbersEventsAndEachWatcherReadsFromItsSubscription) {
  LandedEventHub hub;
  Counter a, b;
  LandedEventHub::Cursor ca, cb;
  ASSERT_TRUE(hub.Subscribe(&a, &ca));
  hub.Publish(LandedEvent{0, 10, "peer", 1});
  ASSERT_TRUE(hub.Subscribe(&b, &cb));
  hub.Publish(LandedEvent{10, 10, "peer-b", 2});
  EXPECT_EQ(a.news, 2u);
  EXPECT_EQ(b.news, 1u);

  LandedEvent e;
  uint64_t dropped = 99;
  ASSERT_EQ(hub.Read(&ca, &e, &dropped), ReadResult::kEvent);
  EXPECT_EQ(e.sequence, 1u);
  EXPECT_EQ(e.source_node, "peer");
  EXPECT_EQ(e.source_transfer_id, 1u);
  EXPECT_EQ(dropped, 0u);
  ASSERT_EQ(hub.Read(&ca, &e, &dropped), ReadResult::kEvent);
  EXPECT_EQ(e.sequence, 2u);
  EXPECT_EQ(e.offset, 10u);
  EXPECT_EQ(e.source_node, "peer-b");
  EXPECT_EQ(hub.Read(&ca, &e, &dropped), ReadResult::kNone);
  // b subscribed after the first event: it sees only the second.
  ASSERT_EQ(hub.Read(&cb, &e, &dropped), ReadResult::kEvent);
  EXPECT_EQ(e.sequence, 2u);
  EXPECT_EQ(hub.Read(&cb, &e, &dropped), ReadResult::kNone);

  hub.Unsubscribe(&a);
  LandedEvent read{20, 1, "peer", 3};
  read.blocks = 7;
  read.bytes = 1;
  read.read = true;
  hub.Publish(read);
  ASSERT_EQ(hub.Read(&cb, &e, &dropped), ReadResult::kEvent);
  EXPECT_EQ(e.sequence, 3u);
  EXPECT_EQ(e.blocks, 7u);
  EXPECT_EQ(e.bytes, 1u);
  EXPECT_TRUE(e.read);
  EXPECT_EQ(a.news, 2u);
  EXPECT_EQ(b.news, 2u);
  EXPECT_EQ(hub.published(), 3u);
}

TEST(LandedEventHubTest, CloseEndsTheStreamAfterItsEventsAndRefusesNewWatchers) {
  LandedEventHub hub;
  Counter a;
  LandedEventHub::Cursor cursor;
  ASSERT_TRUE(hub.Subscribe(&a, &cursor));
  hub.Publish(LandedEvent{0, 10, "peer", 1});
  hub.Close();
  hub.Close();
  EXPECT_EQ(a.news, 2u) << "one for the event, one for the end";
  hub.Publish(LandedEvent{0, 10, "peer", 2});  // too late: the region is gone
  LandedEvent e;
  uint64_t dropped = 0;
  ASSERT_EQ(hub.Read(&cursor, &e, &dropped), ReadResult::kEvent);
  EXPECT_EQ(e.source_transfer_id, 1u);
  EXPECT_EQ(hub.Read(&cursor, &e, &dropped), ReadResult::kEnd);
  EXPECT_EQ(hub.published(), 1u);
  Counter late;
  EXPECT_FALSE(hub.Subscribe(&late, &cursor));
}

// What a poller pays for a watcher that never reads: the hub keeps a fixed
// ring, the publisher never waits, and the watcher, when it reads at last,
// learns exactly how many events it lost before the ones still kept.
TEST(LandedEventHubTest, AWatcherThatNeverReadsNeitherBlocksNorGrowsThePublisher) {
  constexpr uint64_t kEvents = 100 * LandedEventHub::kCapacity + 7;
  LandedEventHub hub;
  Counter stuck;
  LandedEventHub::Cursor cursor;
  ASSERT_TRUE(hub.Subscribe(&stuck, &cursor));
  std::thread poller([&] {
    for (uint64_t i = 1; i <= kEvents; ++i)
      hub.Publish(LandedEvent{i * 8, 8, "a-rather-long-node-name", i});
  });
  poller.join();
  EXPECT_EQ(stuck.news, kEvents);
  EXPECT_EQ(hub.published(), kEvents);

  LandedEvent e;
  uint64_t dropped = 0;
  ASSERT_EQ(hub.Read(&cursor, &e, &dropped), ReadResult::kEvent);
  EXPECT_EQ(dropped, kEvents - LandedEventHub::kCapacity);
  uint64_t expected = kEvents - LandedEventHub::kCapacity + 1;
  EXPECT_EQ(e.sequence, expected);
  EXPECT_EQ(e.source_transfer_id, expected);
  EXPECT_EQ(e.offset, expected * 8);
  while (hub.Read(&cursor, &e, &dropped) == ReadResult::kEvent) {
    ++expected;
    ASSERT_EQ(dropped, 0u);
    ASSERT_EQ(e.sequence, expected);
    ASSERT_EQ(e.source_transfer_id, expected);
  }
  EXPECT_EQ(expected, kEvents);
}

// A watcher reading while the poller publishes sees increasing sequences and
// accounts for every event: read or dropped.
TEST(LandedEventHubTest, ConcurrentReaderAccountsForEveryEvent) {
  constexpr uint64_t kEvents = 20 * LandedEventHub::kCapacity;
  LandedEventHub hub;
  Counter watcher;
  LandedEventHub::Cursor cursor;
  ASSERT_TRUE(hub.Subscribe(&watcher, &cursor));
  std::thread poller([&] {
    for (uint64_t i = 1; i <= kEvents; ++i) hub.Publish(LandedEvent{0, 1, "peer", i});
    hub.Close();
  });
  uint64_t received = 0, dropped_total = 0, last = 0;
  LandedEvent e;
  uint64_t dropped = 0;
  for (ReadResult r; (r = hub.Read(&cursor, &e, &dropped)) != ReadResult::kEnd;) {
    if (r == ReadResult::kNone) {
      std::this_thread::yield();
      continue;
    }
    ASSERT_EQ(e.sequence, last + 1 + dropped);
    ASSERT_EQ(e.source_transfer_id, e.sequence);
    last = e.sequence;
    ++received;
    dropped_total += dropped;
  }
  poller.join();
  EXPECT_EQ(last, kEvents);
  EXPECT_EQ(received + dropped_total, kEvents);
}

}  // namespace
}  // namespace xferd::memory
