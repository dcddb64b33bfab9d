#include "daemon/common/wake_inbox.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace xferd {
namespace {

// A sleep this long with a wake owed means the wake was lost: far beyond any
// scheduling delay, and it bounds the test when the handshake is broken.
constexpr int kLostWakeMs = 5000;
// Round trips through a sleep: enough for pushes to land in every part of the
// consumer's way to sleep (its drain, PrepareToSleep, the poll).
constexpr uint32_t kRounds = 50000;
// Upper bounds of the random pauses (spin iterations) before the consumer's
// PrepareToSleep and before the producer's wake. The consumer's is longer, so
// the wake lands before, inside and after the consumer's handshake alike.
// With Wake() loading sleeping_ before it stores pending_, two to four runs
// in eight failed on a two-core machine loaded far beyond its cores, where
// the two threads seldom run at once; the race needs them to.
constexpr uint32_t kConsumerPause = 2048;
constexpr uint32_t kProducerPause = 256;

bool Readable(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  return ::poll(&pfd, 1, 0) == 1;
}

template <typename T>
std::unique_ptr<WakeInbox<T>> MakeInbox(size_t capacity) {
  auto inbox = WakeInbox<T>::Create(capacity);
  EXPECT_TRUE(inbox.ok()) << inbox.status();
  return *std::move(inbox);
}

// Spreads the producer's wake over the consumer's way to sleep, down to the
// few instructions where a broken handshake loses it.
void RandomPause(std::minstd_rand& rng, uint32_t most) {
  for (volatile uint32_t spin = rng() % most; spin > 0; --spin) {
  }
}

// Spins first, so that on an idle core the producer answers within the
// consumer's way to sleep; then yields, so that on a busy machine it does not
// hold the consumer's core until the next tick.
template <typename Ready>
void AwaitTurn(Ready ready) {
  for (int spins = 0; !ready(); ++spins) {
    if (spins > 1000) std::this_thread::yield();
  }
}

struct ConsumerRun {
  uint64_t sleeps = 0;
  std::string failure;  // empty: every wake arrived
};

// The consumer side of a poller, reduced to the inbox: a pass (`pass` returns
// true once the run is over), then a sleep when PrepareToSleep allows one.
// `owed()` says whether the producer has already woken us for what we still
// wait for: a sleep that times out while owed is a lost wake.
template <typename T, typename Pass, typename Owed>
ConsumerRun Consume(WakeInbox<T>& inbox, Pass pass, Owed owed) {
  ConsumerRun run;
  std::minstd_rand rng(0);
  while (!pass()) {
    RandomPause(rng, kConsumerPause);
    if (!inbox.PrepareToSleep()) continue;
    ++run.sleeps;
    pollfd pfd{inbox.fd(), POLLIN, 0};
    if (::poll(&pfd, 1, kLostWakeMs) == 0) {
      run.failure = owed() ? "lost wake: slept " + std::to_string(kLostWakeMs) +
                                 " ms although the producer had woken it"
                           : "the producer stalled for " + std::to_string(kLostWakeMs) + " ms";
      return run;
    }
  }
  return run;
}

// The producer side: round i waits until the consumer has taken round i - 1
// (`taken()`), so that each wake finds it on its way to sleep, pauses, then
// runs `act(i)`. Stops and joins when destroyed.
class Producer {
 public:
  template <typename Taken, typename Act>
  Producer(Taken taken, Act act)
      : thread_([this, taken, act] {
          std::minstd_rand rng(1);
          for (uint32_t i = 1; i <= kRounds && !stop_.load(); ++i) {
            AwaitTurn([&] { return taken() == i - 1 || stop_.load(); });
            RandomPause(rng, kProducerPause);
            act(i);
          }
        }) {}
  ~Producer() {
    stop_.store(true);
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(WakeInboxTest, NoPushIsLostBetweenThePassAndTheSleep) {
  auto inbox = MakeInbox<uint32_t>(4);
  std::atomic<uint32_t> consumed{0};
  std::atomic<uint32_t> pushed{0};
  Producer producer([&] { return consumed.load(); },
                    [&](uint32_t i) {
                      EXPECT_TRUE(inbox->Push(i));
                      pushed.store(i);
                    });
  uint32_t expected = 1;
  const ConsumerRun run = Consume(
      *inbox,
      [&] {
        inbox->Drain([&](uint32_t& value) {
          EXPECT_EQ(value, expected);
          consumed.store(expected++);
        });
        return expected > kRounds;
      },
      [&] { return pushed.load() >= expected; });
  EXPECT_EQ(run.failure, "") << "waiting for command " << expected << " of " << kRounds;
  // The race was run, not skipped: many rounds end in a real sleep.
  EXPECT_GT(run.sleeps, kRounds / 100);
}

TEST(WakeInboxTest, NoBareWakeIsLostBetweenThePassAndTheSleep) {
  auto inbox = MakeInbox<int>(1);
  std::atomic<uint32_t> round{0};  // published by the producer before each wake
  std::atomic<uint32_t> seen{0};
  Producer producer([&] { return seen.load(); },
                    [&](uint32_t i) {
                      round.store(i, std::memory_order_relaxed);
                      inbox->Wake();
                    });
  const ConsumerRun run = Consume(
      *inbox,
      [&] {
        EXPECT_EQ(inbox->Drain([](int&) {}), 0u);
        seen.store(round.load(std::memory_order_relaxed));
        return seen.load() == kRounds;
      },
      [&] { return round.load() > seen.load(); });
  EXPECT_EQ(run.failure, "") << "waiting for wake " << seen.load() + 1 << " of " << kRounds;
  EXPECT_GT(run.sleeps, kRounds / 100);
}

TEST(WakeInboxTest, PrepareToSleepRefusesWhileAWakeIsPending) {
  auto inbox = MakeInbox<int>(4);
  EXPECT_TRUE(inbox->PrepareToSleep());  // nothing ever came
  EXPECT_TRUE(inbox->sleeping());
  EXPECT_EQ(inbox->Drain([](int&) {}), 0u);  // woke for nothing
  EXPECT_FALSE(inbox->sleeping());

  inbox->Wake();
  EXPECT_FALSE(inbox->PrepareToSleep());
  EXPECT_FALSE(inbox->sleeping());
  EXPECT_FALSE(inbox->PrepareToSleep()) << "the wake is pending until a pass takes it";
  EXPECT_EQ(inbox->Drain([](int&) {}), 0u);
  EXPECT_TRUE(inbox->PrepareToSleep());
  EXPECT_EQ(inbox->Drain([](int&) {}), 0u);

  ASSERT_TRUE(inbox->Push(7));
  EXPECT_FALSE(inbox->PrepareToSleep()) << "a queued command must stop the sleep";
}

TEST(WakeInboxTest, OnlyASleepingConsumerIsSignalledAndItsPassClearsTheSignal) {
  auto inbox = MakeInbox<int>(4);
  ASSERT_TRUE(inbox->Push(1));
  EXPECT_FALSE(Readable(inbox->fd())) << "an awake consumer needs no syscall";
  EXPECT_EQ(inbox->Drain([](int&) {}), 1u);

  ASSERT_TRUE(inbox->PrepareToSleep());
  ASSERT_TRUE(inbox->Push(2));
  EXPECT_TRUE(Readable(inbox->fd())) << "a sleeping consumer must be signalled";
  EXPECT_EQ(inbox->Drain([](int&) {}), 1u);
  EXPECT_FALSE(Readable(inbox->fd())) << "a stale signal would end every later sleep at once";
}

// PushDeferred queues without the eventfd: a sleeping consumer stays asleep
// until the caller's Wake(), and a pass that begins anyway takes the command.
TEST(WakeInboxTest, ADeferredPushWaitsForTheWakeOrTheNextPass) {
  auto inbox = MakeInbox<int>(4);
  ASSERT_TRUE(inbox->PrepareToSleep());
  ASSERT_TRUE(inbox->PushDeferred(1));
  ASSERT_TRUE(inbox->PushDeferred(2));
  EXPECT_FALSE(Readable(inbox->fd())) << "a deferred push must not signal";
  inbox->Wake();
  EXPECT_TRUE(Readable(inbox->fd())) << "the one wake signals the sleeper";
  std::vector<int> seen;
  EXPECT_EQ(inbox->Drain([&](int& v) { seen.push_back(v); }), 2u);
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));

  ASSERT_TRUE(inbox->PushDeferred(3));
  EXPECT_FALSE(inbox->PrepareToSleep()) << "a deferred command must still stop the sleep";
  EXPECT_EQ(inbox->Drain([](int&) {}), 1u) << "a pass takes it without any wake";
}

TEST(WakeInboxTest, DrainHandsOverInOrderAndLaterPushesWaitForTheNextPass) {
  auto inbox = MakeInbox<std::unique_ptr<int>>(8);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(inbox->Push(std::make_unique<int>(i)));
  std::vector<int> got;
  EXPECT_EQ(inbox->Drain([&](std::unique_ptr<int>& v) {
    got.push_back(*v);
    if (*v == 4) {
      ASSERT_TRUE(inbox->Push(std::make_unique<int>(5)));  // from inside the pass
    }
  }),
            5u);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(inbox->PrepareToSleep()) << "the push made during the pass is pending";
  got.clear();
  EXPECT_EQ(inbox->Drain([&](std::unique_ptr<int>& v) { got.push_back(*v); }), 1u);
  EXPECT_EQ(got, (std::vector<int>{5}));
  EXPECT_EQ(inbox->Drain([](std::unique_ptr<int>&) {}), 0u);
}

TEST(WakeInboxTest, CapacityBoundsWhatMayWait) {
  auto inbox = MakeInbox<int>(3);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(inbox->Push(i)) << i;
  EXPECT_FALSE(inbox->Push(3)) << "a fourth command exceeds the capacity of 3";
  std::vector<int> got;
  EXPECT_EQ(inbox->Drain([&](int& v) { got.push_back(v); }), 3u);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2})) << "the refused command was dropped";
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(inbox->Push(i)) << "room again after the drain";

  auto unbounded = MakeInbox<int>(WakeInbox<int>::kUnbounded);
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(unbounded->Push(i));
  EXPECT_EQ(unbounded->Drain([](int&) {}), 10000u);
}

}  // namespace
}  // namespace xferd
