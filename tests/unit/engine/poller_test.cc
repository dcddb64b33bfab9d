#include "daemon/engine/poller.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "tests/unit/engine/engine_harness.h"

namespace xferd::testing {
namespace {

using PollerTest = TwoEngineTest;

TEST_F(PollerTest, IdlePollersSleepAndWakeForWork) {
  ASSERT_TRUE(WaitUntil([&] {
    for (const engine::PollerStats& p : a_->engine->Stats().pollers) {
      if (!p.sleeping || p.sleeps < 1) return false;
    }
    return true;
  })) << "an idle poller did not go to sleep";
  // Work reaches sleeping pollers.
  Fill(*src_, 3);
  EXPECT_EQ(Write(1 << 20).state, engine::TransferState::kDone);
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data(), 1 << 20), 0);
}

// Pollers run where their worker asks (the CPUs of its device's NUMA
// node), as the kernel reports the thread's affinity; unasked, anywhere.
TEST(PollerPinningTest, PollersArePinnedToTheCpusTheirWorkerNames) {
  const long cpus_online = ::sysconf(_SC_NPROCESSORS_ONLN);
  ASSERT_GE(cpus_online, 1);
  const uint32_t last = static_cast<uint32_t>(cpus_online - 1);
  memory::RegistryOptions options;
  memory::RegionRegistry regions(options);
  FakeFabric fabric;
  auto notes = engine::Notes::Create(16, [](engine::Transfer&) {});
  ASSERT_TRUE(notes.ok()) << notes.status();
  for (const std::vector<uint32_t>& wanted : {std::vector<uint32_t>{last},
                                              std::vector<uint32_t>{}}) {
    FakeTransport transport(fabric, regions, 2, 4);
    transport.SetPreferredCpus(wanted);
    auto pool = engine::PollerPool::Create(transport, 2, engine::PollerOptions{}, **notes);
    ASSERT_TRUE(pool.ok()) << pool.status();
    (*pool)->Start();
    for (uint32_t i = 0; i < 2; ++i) EXPECT_EQ((*pool)->at(i).cpus(), wanted) << "poller " << i;
    (*pool)->Stop();
  }
}

EngineConfig SmallSlicesShallowLanes() {
  EngineConfig config;
  config.slice_size = 4096;
  config.lane_depth = 2;
  return config;
}

class SharedLanesTest : public TwoEngineTest {
 protected:
  SharedLanesTest() : TwoEngineTest(SmallSlicesShallowLanes()) {}
};

TEST_F(SharedLanesTest, ManyConcurrentTransfersShareLanesFairly) {
  Fill(*src_, 4);
  std::vector<engine::TransferSpec> writes;
  for (uint64_t i = 0; i < 16; ++i)
    writes.push_back(Spec("src", "b", "dst", 65536, i << 16, i << 16));
  auto ts = h_.Submit(*a_, writes, true);
  ASSERT_TRUE(ts.ok());
  for (const auto& t : *ts) EXPECT_EQ(h_.Wait(t).state, engine::TransferState::kDone);
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data(), 1 << 20), 0);
}

}  // namespace
}  // namespace xferd::testing
