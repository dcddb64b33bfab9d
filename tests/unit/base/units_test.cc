#include "daemon/base/units.h"

#include <gtest/gtest.h>

namespace xferd {
namespace {

TEST(UnitsTest, ParseSizeAcceptsUnits) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("64k"), 64u << 10);
  EXPECT_EQ(*ParseSize("64KiB"), 64u << 10);
  EXPECT_EQ(*ParseSize(" 1 MiB "), 1u << 20);
  EXPECT_EQ(*ParseSize("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*ParseSize("2t"), 2ull << 40);
}

TEST(UnitsTest, ParseSizeRejectsGarbage) {
  for (const char* bad : {"", "k", "12 parsecs", "-5", "1.5", "1e3", "99999999999T"}) {
    EXPECT_FALSE(ParseSize(bad).ok()) << bad;
  }
}

TEST(UnitsTest, ParseDuration) {
  EXPECT_EQ(*ParseDurationText("250ms"), absl::Milliseconds(250));
  EXPECT_EQ(*ParseDurationText("2m"), absl::Minutes(2));
  EXPECT_FALSE(ParseDurationText("-1s").ok());
  EXPECT_FALSE(ParseDurationText("soon").ok());
}

TEST(UnitsTest, Format) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(1ull << 30), "1.00 GiB");
  EXPECT_EQ(FormatRate(2.5e9), "2.50 GB/s");
  EXPECT_EQ(FormatRate(1.5e6), "1.5 MB/s");
}

}  // namespace
}  // namespace xferd
