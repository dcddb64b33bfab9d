// Priority classes over every real transport (TCP, TCP with TLS lanes,
// verbs where an RDMA device is, and the fake): two engines linked by the
// transport, a bulk write under way, then a critical one. The critical
// write waits behind at most priorities.lane_bytes of the bulk one on each
// lane, not behind the lane's whole depth, so it ends while the bulk write
// has moved little. Every byte is checked. (The order on the lanes itself
// is tests/unit/engine/priority_test.cc, with completions held.)
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "tests/testing/wait_until.h"
#include "tests/transport/transport_factories.h"
#include "tests/unit/engine/engine_harness.h"

namespace xferd::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBulk = 64 * kMiB;
constexpr uint64_t kCritical = 256 << 10;

class EnginePriorityTest : public ::testing::TestWithParam<transport::TransportFactory> {
 protected:
  void SetUp() override {
    memory::RegistryOptions options;
    memory::RegionRegistry probe_regions(options);
    if (auto probe = GetParam().create(probe_regions, 2, "a"); !probe.ok()) {
      GTEST_SKIP() << GetParam().name << ": " << probe.status();
    }
    EngineConfig config;  // the daemon's defaults: 1 MiB slices, 64 deep, 2 MiB lane_bytes
    h_ = std::make_unique<EngineHarness>(config, GetParam().create);
    a_ = &h_->Add("a");
    b_ = &h_->Add("b");
    src_ = h_->RegisterOrDie(*a_, "src", kBulk + kCritical, false);
    dst_ = h_->RegisterOrDie(*b_, "dst", kBulk + kCritical, true);
    ASSERT_TRUE(h_->Connect(*a_, *b_).ok());
  }

  engine::TransferSpec Write(uint64_t length, uint64_t offset, engine::Priority priority) {
    engine::TransferSpec spec = Spec("src", "b", "dst", length, offset, offset);
    spec.priority = priority;
    return spec;
  }

  std::unique_ptr<EngineHarness> h_;
  Node* a_ = nullptr;
  Node* b_ = nullptr;
  std::shared_ptr<memory::Region> src_, dst_;
};

TEST_P(EnginePriorityTest, ACriticalWriteGoesAheadOfABulkOneUnderWay) {
  Fill(*src_, 9);
  auto bulk = h_->Submit(*a_, {Write(kBulk, 0, engine::Priority::kBulk)});
  ASSERT_TRUE(bulk.ok()) << bulk.status();
  const std::shared_ptr<engine::Transfer>& b = (*bulk)[0];
  ASSERT_TRUE(WaitUntil([&] { return b->Info().bytes_done > 0; }));
  const uint64_t before = b->Info().bytes_done;
  auto critical = h_->Submit(*a_, {Write(kCritical, kBulk, engine::Priority::kCritical)});
  ASSERT_TRUE(critical.ok()) << critical.status();
  const engine::TransferInfo c = h_->Wait((*critical)[0]);
  const uint64_t during = b->Info().bytes_done - before;
  ASSERT_EQ(c.state, engine::TransferState::kDone) << c.error;
  ASSERT_EQ(h_->Wait(b).state, engine::TransferState::kDone);
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data(), kBulk + kCritical), 0);
  // Ahead of it: at most lane_bytes (2 MiB) on each of 2 lanes, and what the
  // bulk write moves meanwhile beside it. Behind a lane's whole depth (64 x
  // 1 MiB on each) it would end with the bulk write's last slices.
  EXPECT_LT(during, kBulk * 3 / 8) << GetParam().name << ": the bulk write moved "
                                   << during / kMiB << " MiB while the critical one ran";
}

INSTANTIATE_TEST_SUITE_P(AllTransports, EnginePriorityTest,
                         ::testing::ValuesIn(transport::AllTransportFactories()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace xferd::testing
