#include "daemon/engine/transfer_table.h"

#include <gtest/gtest.h>

#include "daemon/engine/peer.h"
#include "tests/testing/fake_transport.h"

namespace xferd::engine {
namespace {

using xferd::testing::NullLink;

class TransferTableTest : public ::testing::Test, public TransferListener {
 protected:
  void OnTransferEnding(const Transfer& t, TransferState state, absl::StatusCode code) override {
    table_.Count(t, state, code);
  }
  void OnTransferEnded(Transfer& t) override { table_.Retire(t.id()); }

  // One transfer of class `priority` (of none: not admitted).
  static std::vector<Transfer::Plan> One(Priority priority = Priority::kNormal) {
    std::vector<Transfer::Plan> plans(1);
    plans[0].spec.priority = priority;
    return plans;
  }

  std::shared_ptr<Transfer> Add(uint64_t batch = 0, bool verify = false) {
    EXPECT_TRUE(table_.Admit(One()).ok());
    Transfer::Plan plan;
    plan.submitted_at = absl::Now();
    plan.id = table_.NextId();
    plan.batch_id = batch;
    plan.spec.length = 4096;
    plan.local = region_;
    plan.blocks = {transport::Block{0, 0, 4096}};
    plan.peer = peer_;
    plan.link = peer_->link();
    plan.slice_size = 4096;
    plan.spec.verify = verify;
    auto t = std::make_shared<Transfer>(plan, this);
    table_.Insert(t);
    return t;
  }

  // Room for 3 in flight, 2 in the history, and the checksum of 1 block.
  TransferTable table_{3, 0, 2, 8};
  std::shared_ptr<memory::Region> region_ = std::make_shared<memory::Region>(
      1, memory::RegionSpec{"r", 4096},
      *memory::MemoryBacking::Create({memory::Backing::kAnonymous, 4096}));
  std::shared_ptr<Peer> peer_ =
      std::make_shared<Peer>(NodeIdentity{"peer", 1, "x"}, true, std::make_shared<NullLink>(),
                             transport::TransportKind::kTcp, "", 1, 2);
};

// History is bounded by count; the checksums its snapshots keep by bytes:
// beyond the budget the oldest snapshots lose theirs, and only theirs.
TEST_F(TransferTableTest, HistoryKeepsTheNewestChecksumsWithinItsBudget) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    std::shared_ptr<Transfer> t = Add(0, /*verify=*/true);
    ids.push_back(t->id());
    ASSERT_TRUE(t->Finish(TransferState::kDone, absl::OkStatus()));
    ASSERT_NE(t->Info().checksums, nullptr);
  }
  table_.Sweep();  // the transfers were let go: snapshots only
  // The history holds two (the first was evicted); the budget, one block's
  // checksum: the newest keeps it, the one before keeps the rest.
  EXPECT_FALSE(table_.Lookup(ids[0]).has_value());
  ASSERT_TRUE(table_.Lookup(ids[1]).has_value());
  EXPECT_EQ(table_.Lookup(ids[1])->checksums, nullptr);
  EXPECT_EQ(table_.Lookup(ids[1])->state, TransferState::kDone);
  ASSERT_NE(table_.Lookup(ids[2])->checksums, nullptr);
  EXPECT_EQ(table_.Lookup(ids[2])->checksums->size(), 1u);
  // A transfer that failed has none.
  std::shared_ptr<Transfer> failed = Add(0, /*verify=*/true);
  ASSERT_TRUE(failed->Finish(TransferState::kFailed, absl::DataLossError("x")));
  EXPECT_EQ(failed->Info().checksums, nullptr);
}

TEST_F(TransferTableTest, AdmissionCountsInFlightOnly) {
  auto a = Add();
  auto b = Add();
  auto c = Add();
  absl::Status full = table_.Admit(One());
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  a->Finish(TransferState::kDone, absl::OkStatus());
  EXPECT_EQ(table_.counters().in_flight, 2u);
  EXPECT_TRUE(table_.Admit(One()).ok());
  EXPECT_EQ(table_.counters().in_flight, 3u);
}

TEST(TransferTableReserveTest, TheReserveAdmitsOnlyWhollyCriticalRequests) {
  TransferTable table(4, 2, 10);
  std::vector<Transfer::Plan> two(2);
  ASSERT_TRUE(table.Admit(two).ok());
  std::vector<Transfer::Plan> mixed(2);
  mixed[0].spec.priority = Priority::kCritical;
  const absl::Status refused = table.Admit(mixed);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "too many transfers in flight (2 of 2 below critical priority: "
            "engine.max_inflight_transfers=4 less priorities.critical_reserve=2; this request "
            "adds 2): wait for some to finish and retry");
  mixed[1].spec.priority = Priority::kCritical;
  EXPECT_TRUE(table.Admit(mixed).ok());
  const TransferCounters c = table.counters();
  EXPECT_EQ(c.in_flight, 4u);
  EXPECT_EQ(c.by_priority[PriorityIndex(Priority::kCritical)].in_flight, 2u);
  EXPECT_EQ(c.by_priority[PriorityIndex(Priority::kNormal)].in_flight, 2u);
}

TEST_F(TransferTableTest, HistoryIsBoundedNewestFirst) {
  std::vector<std::shared_ptr<Transfer>> ts;
  for (int i = 0; i < 5; ++i) {
    auto t = Add();
    t->Finish(i % 2 ? TransferState::kFailed : TransferState::kDone,
              i % 2 ? absl::UnavailableError("x") : absl::OkStatus());
    ts.push_back(t);
  }
  auto listed = table_.List(TransferFilter{true, 0, 0});
  ASSERT_EQ(listed.size(), 2u);  // history of 2
  EXPECT_EQ(listed[0].id, ts[4]->id());
  EXPECT_FALSE(table_.Lookup(ts[0]->id()));
  const TransferCounters c = table_.counters();
  EXPECT_EQ(c.submitted, 5u);
  EXPECT_EQ(c.done, 3u);
  EXPECT_EQ(c.failed, 2u);
  EXPECT_EQ(c.errors.at("UNAVAILABLE"), 2u);
}

TEST_F(TransferTableTest, FinishedTransfersShrinkToSnapshotsAndReleaseTheirRegion) {
  auto t = Add();
  std::weak_ptr<Transfer> weak = t;
  const uint64_t id = t->id();
  t->AddInFlight(1);  // a posted write still carries its address
  t->Finish(TransferState::kDone, absl::OkStatus());
  t.reset();
  EXPECT_NE(table_.FindLive(id), nullptr);
  EXPECT_EQ(table_.Sweep(), 1u);
  table_.FindLive(id)->RemoveInFlight();
  EXPECT_EQ(table_.Sweep(), 0u);
  EXPECT_TRUE(weak.expired());  // and with it the region reference
  EXPECT_EQ(region_.use_count(), 1);
  ASSERT_TRUE(table_.Lookup(id));
  EXPECT_EQ(table_.Lookup(id)->state, TransferState::kDone);
  EXPECT_EQ(table_.FindLive(id), nullptr);
}

TEST_F(TransferTableTest, HeldTransfersAreNotShrunk) {
  auto held = Add();
  held->Finish(TransferState::kDone, absl::OkStatus());
  EXPECT_EQ(table_.Sweep(), 1u);  // a poller or reply still holds it
  EXPECT_EQ(table_.FindLive(held->id()), held);
  held.reset();
  EXPECT_EQ(table_.Sweep(), 0u);
}

TEST_F(TransferTableTest, EvictionWaitsForWritesInFlight) {
  auto pinned = Add();
  pinned->AddInFlight(1);
  pinned->Finish(TransferState::kFailed, absl::UnavailableError("x"));
  for (int i = 0; i < 3; ++i) Add()->Finish(TransferState::kDone, absl::OkStatus());
  EXPECT_EQ(table_.FindLive(pinned->id()), pinned);  // still referenced by a posted write
  pinned->RemoveInFlight();
  pinned.reset();
  Add()->Finish(TransferState::kDone, absl::OkStatus());
  EXPECT_FALSE(table_.Lookup(1));
}

TEST_F(TransferTableTest, FiltersByBatchAndState) {
  auto a = Add(7);
  auto b = Add(8);
  b->Finish(TransferState::kDone, absl::OkStatus());
  EXPECT_EQ(table_.List(TransferFilter{false, 0, 0}).size(), 1u);
  EXPECT_EQ(table_.List(TransferFilter{true, 8, 0}).size(), 1u);
  EXPECT_EQ(table_.InFlight().size(), 1u);
  a->Finish(TransferState::kDone, absl::OkStatus());
}

}  // namespace
}  // namespace xferd::engine
