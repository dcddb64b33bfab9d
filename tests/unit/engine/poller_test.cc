#include "daemon/engine/poller.h"

#include <gtest/gtest.h>

#include "tests/unit/engine/engine_harness.h"

namespace xferd::testing {
namespace {

TEST(PollerTest, IdlePollersSleepAndWakeForWork) {
  EngineHarness h;
  Node& a = h.Add("a");
  Node& b = h.Add("b");
  h.RegisterOrDie(a, "src", 1 << 20, false);
  h.RegisterOrDie(b, "dst", 1 << 20, true);
  ASSERT_TRUE(h.Connect(a, b).ok());
  absl::SleepFor(absl::Milliseconds(50));
  for (const engine::PollerStats& p : a.engine->Stats().pollers) {
    EXPECT_TRUE(p.sleeping);
    EXPECT_GE(p.sleeps, 1u);
  }
  // Work reaches sleeping pollers.
  auto t = (*h.Submit(a, {Spec("src", "b", "dst", 1 << 20)}))[0];
  EXPECT_EQ(h.Wait(t, absl::Seconds(5)).state, engine::TransferState::kDone);
}

TEST(PollerTest, ManyConcurrentTransfersShareLanesFairly) {
  EngineConfig config;
  config.slice_size = 4096;
  config.lane_depth = 2;
  EngineHarness h(config);
  Node& a = h.Add("a");
  Node& b = h.Add("b");
  auto src = h.RegisterOrDie(a, "src", 1 << 20, false);
  auto dst = h.RegisterOrDie(b, "dst", 1 << 20, true);
  Fill(*src, 4);
  ASSERT_TRUE(h.Connect(a, b).ok());
  std::vector<engine::WriteSpec> writes;
  for (uint64_t i = 0; i < 16; ++i)
    writes.push_back(Spec("src", "b", "dst", 65536, i << 16, i << 16));
  auto ts = h.Submit(a, writes, true);
  ASSERT_TRUE(ts.ok());
  for (const auto& t : *ts) EXPECT_EQ(h.Wait(t).state, engine::TransferState::kDone);
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), 1 << 20), 0);
}

}  // namespace
}  // namespace xferd::testing
