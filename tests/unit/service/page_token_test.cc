#include "daemon/service/page_token.h"

#include <gtest/gtest.h>

namespace xferd::service {
namespace {

TEST(PageTokenTest, SizesAreCapped) {
  EXPECT_EQ(PageSize(0), kMaxPageSize);
  EXPECT_EQ(PageSize(7), 7u);
  EXPECT_EQ(PageSize(kMaxPageSize + 1), kMaxPageSize);
}

TEST(PageTokenTest, TokensBelongToTheirList) {
  const std::string token = PageToken("regions", "r00042");
  absl::StatusOr<std::string> start = PageStart("regions", token);
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(*start, "r00042");
  EXPECT_EQ(*PageStart("regions", ""), "");
  EXPECT_EQ(PageStart("transfers", token).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PageStart("regions", "garbage").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PageTokenTest, APageStopsAtItsCountOrItsBytes) {
  PageFill by_count(/*max_items=*/3, /*max_bytes=*/1000);
  EXPECT_TRUE(by_count.Take(10));
  EXPECT_TRUE(by_count.Take(10));
  EXPECT_TRUE(by_count.Take(10));
  EXPECT_FALSE(by_count.Take(10));
  EXPECT_EQ(by_count.items(), 3u);

  PageFill by_bytes(/*max_items=*/100, /*max_bytes=*/1000);
  EXPECT_TRUE(by_bytes.Take(400));
  EXPECT_TRUE(by_bytes.Take(600));  // exactly full
  EXPECT_FALSE(by_bytes.Take(1));
  EXPECT_EQ(by_bytes.items(), 2u);

  // The first item goes on the page however large: every page moves on.
  PageFill huge(/*max_items=*/100, /*max_bytes=*/1000);
  EXPECT_TRUE(huge.Take(5000));
  EXPECT_FALSE(huge.Take(1));
  EXPECT_EQ(huge.items(), 1u);
}

}  // namespace
}  // namespace xferd::service
