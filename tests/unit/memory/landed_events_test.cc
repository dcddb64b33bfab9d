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

// Stages n ranges (16 bytes each) for `node`'s transfer `id`, in one chunk.
absl::Status StageN(LandedEventHub& hub, const std::string& node, uint64_t id, size_t n) {
  return hub.Stage(node, id, std::string(8 * n, 'o'), std::string(8 * n, 'l'), true);
}

LandedEvent ManyBlocks(const std::string& node, uint64_t id) {
  LandedEvent e{0, 100, node, id};
  e.blocks = 3;
  e.bytes = 30;
  return e;
}

TEST(LandedRangesTest, StagedRangesGoToTheirTransfersEventOnly) {
  LandedEventHub hub;
  hub.KeepRanges();
  Counter w;
  LandedEventHub::Cursor c;
  ASSERT_TRUE(hub.Subscribe(&w, &c));
  // In two chunks, the first of which replaces a stale list of the same id.
  ASSERT_TRUE(StageN(hub, "a", 7, 5).ok());
  ASSERT_TRUE(hub.Stage("a", 7, "01234567", "abcdefgh", true).ok());
  ASSERT_TRUE(hub.Stage("a", 7, "89ABCDEFGHIJKLMN", "ijklmnopqrstuvwx", false).ok());
  EXPECT_EQ(hub.range_bytes(), 48u);
  hub.Publish(ManyBlocks("b", 7));  // another node's transfer 7: not these
  hub.Publish(ManyBlocks("a", 7));
  LandedEvent single{0, 10, "a", 8};  // one block: its span says it all
  single.blocks = 1;
  hub.Publish(single);
  LandedEvent e;
  uint64_t dropped = 0;
  ASSERT_EQ(hub.Read(&c, &e, &dropped), ReadResult::kEvent);
  EXPECT_EQ(e.ranges, nullptr);
  EXPECT_TRUE(e.ranges_missing);
  ASSERT_EQ(hub.Read(&c, &e, &dropped), ReadResult::kEvent);
  ASSERT_NE(e.ranges, nullptr);
  EXPECT_EQ(e.ranges->offsets, "0123456789ABCDEFGHIJKLMN");
  EXPECT_EQ(e.ranges->lengths, "abcdefghijklmnopqrstuvwx");
  EXPECT_FALSE(e.ranges_missing);
  ASSERT_EQ(hub.Read(&c, &e, &dropped), ReadResult::kEvent);
  EXPECT_EQ(e.ranges, nullptr);
  EXPECT_FALSE(e.ranges_missing);
  EXPECT_EQ(hub.range_bytes(), 48u);  // now held by the ring
  hub.Close();
}

TEST(LandedRangesTest, OnlyARegionThatKeepsRangesStagesThem) {
  LandedEventHub hub;
  EXPECT_EQ(StageN(hub, "a", 1, 1).code(), absl::StatusCode::kFailedPrecondition);
  hub.KeepRanges();
  EXPECT_EQ(hub.Stage("a", 1, "01234567", "", true).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StageN(hub, "a", 1, LandedEventHub::kMaxRangeBytes / 16 + 1).code(),
            absl::StatusCode::kResourceExhausted);
  // Chunk by chunk past the bound: refused, and what was staged is dropped.
  const size_t half = LandedEventHub::kMaxRangeBytes / 16 / 2;
  ASSERT_TRUE(StageN(hub, "a", 2, half).ok());
  const std::string chunk(8 * (half + 1), 'x');
  EXPECT_EQ(hub.Stage("a", 2, chunk, chunk, false).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(hub.range_bytes(), 0u);
  hub.Close();
  EXPECT_EQ(StageN(hub, "a", 1, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(hub.range_bytes(), 0u);
}

TEST(LandedRangesTest, TheBoundDropsOldestStagedThenOldestEventsRanges) {
  LandedEventHub hub;
  hub.KeepRanges();
  Counter w;
  LandedEventHub::Cursor c;
  ASSERT_TRUE(hub.Subscribe(&w, &c));
  const size_t quarter = LandedEventHub::kMaxRangeBytes / 16 / 4;  // ranges in a quarter
  ASSERT_TRUE(StageN(hub, "a", 1, quarter).ok());
  hub.Publish(ManyBlocks("a", 1));                 // in the ring now
  ASSERT_TRUE(StageN(hub, "a", 2, quarter).ok());  // never lands (failed)
  ASSERT_TRUE(StageN(hub, "a", 3, quarter).ok());
  ASSERT_TRUE(StageN(hub, "a", 4, quarter).ok());
  EXPECT_EQ(hub.range_bytes(), LandedEventHub::kMaxRangeBytes);
  // Room for one more quarter: transfer 2's staged ranges go first.
  ASSERT_TRUE(StageN(hub, "a", 5, quarter).ok());
  hub.Publish(ManyBlocks("a", 2));
  // Two more quarters: the staged ranges of 3 and 4, the oldest, go.
  ASSERT_TRUE(StageN(hub, "a", 6, 2 * quarter).ok());
  hub.Publish(ManyBlocks("a", 3));
  hub.Publish(ManyBlocks("a", 4));
  hub.Publish(ManyBlocks("a", 5));  // ring: 1 and 5; staged: 6
  // Three quarters: 6's staged ranges, then event 1's in the ring.
  ASSERT_TRUE(StageN(hub, "a", 7, 3 * quarter).ok());
  EXPECT_EQ(hub.range_bytes(), LandedEventHub::kMaxRangeBytes);
  LandedEvent e;
  uint64_t dropped = 0;
  for (uint64_t id : {1, 2, 3, 4}) {
    ASSERT_EQ(hub.Read(&c, &e, &dropped), ReadResult::kEvent);
    EXPECT_EQ(e.source_transfer_id, id);
    EXPECT_EQ(e.ranges, nullptr) << id;
    EXPECT_TRUE(e.ranges_missing) << id;
  }
  ASSERT_EQ(hub.Read(&c, &e, &dropped), ReadResult::kEvent);
  EXPECT_EQ(e.source_transfer_id, 5u);
  ASSERT_NE(e.ranges, nullptr);
  EXPECT_EQ(e.ranges->bytes(), 16 * quarter);
  hub.Close();                                 // the staged ranges of 7 go with the region
  EXPECT_EQ(hub.range_bytes(), 16 * quarter);  // 5's, held by the ring
}

TEST(LandedRangesTest, UnwatchedLandingsReleaseTheirStagedRanges) {
  LandedEventHub hub;
  hub.KeepRanges();
  for (uint64_t id = 1; id <= 1000; ++id) {
    ASSERT_TRUE(StageN(hub, "a", id, 2).ok());
    hub.Publish(ManyBlocks("a", id));
  }
  EXPECT_EQ(hub.range_bytes(), 0u);
}

}  // namespace
}  // namespace xferd::memory
