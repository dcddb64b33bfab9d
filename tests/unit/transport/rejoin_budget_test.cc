#include "daemon/transport/verbs/rejoin_budget.h"

#include <gtest/gtest.h>

namespace xferd::transport::verbs {
namespace {

TEST(RejoinBudgetTest, BacksOffThenGivesUp) {
  RejoinBudget budget;
  absl::Time now = absl::UnixEpoch();
  absl::Duration wait = RejoinBudget::kFirstBackoff;
  for (uint32_t i = 0; i < RejoinBudget::kAttempts; ++i) {
    ASSERT_TRUE(budget.Due(now, 0)) << "attempt " << i;
    budget.Tried(now);
    EXPECT_FALSE(budget.Due(now + wait - absl::Milliseconds(1), 0)) << "attempt " << i;
    now += wait;
    wait *= 2;
  }
  EXPECT_EQ(budget.attempts(), RejoinBudget::kAttempts);
  EXPECT_FALSE(budget.Due(now + absl::Hours(1), 0));  // spent: the link runs on what it has
}

TEST(RejoinBudgetTest, APortComingBackOrASuccessStartsAfresh) {
  RejoinBudget budget;
  const absl::Time now = absl::UnixEpoch();
  for (uint32_t i = 0; i < RejoinBudget::kAttempts; ++i) budget.Tried(now);
  EXPECT_FALSE(budget.Due(now + absl::Hours(1), 0));
  // The port went ACTIVE again (one more activation): every attempt back.
  EXPECT_TRUE(budget.Due(now, 1));
  EXPECT_EQ(budget.attempts(), 0u);
  budget.Tried(now);
  EXPECT_FALSE(budget.Due(now, 1));  // the same activation: backing off
  budget.Succeeded();
  EXPECT_TRUE(budget.Due(now, 1));
}

}  // namespace
}  // namespace xferd::transport::verbs
