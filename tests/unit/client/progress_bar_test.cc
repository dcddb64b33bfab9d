#include "client/cpp/progress_bar.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "absl/time/clock.h"

namespace xferd::client {
namespace {

TEST(RenderProgressTest, BarPercentBytesAndRate) {
  EXPECT_EQ(RenderProgress(0, 1 << 20, 0, 10), "[>         ]   0.0%  0 B / 1.00 MiB  -");
  EXPECT_EQ(RenderProgress(1 << 19, 1 << 20, 2.5e9, 10),
            "[#####>    ]  50.0%  512.00 KiB / 1.00 MiB  2.50 GB/s");
  EXPECT_EQ(RenderProgress(1 << 20, 1 << 20, 1e6, 10),
            "[##########] 100.0%  1.00 MiB / 1.00 MiB  1.0 MB/s");
}

TEST(RenderProgressTest, EmptyTotalAndOverrunStayInTheBar) {
  EXPECT_EQ(RenderProgress(0, 0, 0, 4), "[>   ]      -  0 B / 0 B  -");
  EXPECT_EQ(RenderProgress(20, 10, 0, 4), "[####] 200.0%  20 B / 10 B  -");
}

TEST(RenderProgressTest, ManyBlocksAddTheirCount) {
  EXPECT_EQ(RenderProgress(1 << 19, 1 << 20, 0, 4, {128, 256}),
            "[##> ]  50.0%  512.00 KiB / 1.00 MiB  -  128/256 blocks");
  // One block (a contiguous range) is not worth a mention.
  EXPECT_EQ(RenderProgress(0, 10, 0, 4, {0, 1}), "[>   ]   0.0%  0 B / 10 B  -");
}

TEST(BlocksDoneTest, ProportionalAndAllOnlyAtTheEnd) {
  EXPECT_EQ(BlocksDone(0, 4096, 4), 0u);
  EXPECT_EQ(BlocksDone(2048, 4096, 4), 2u);
  EXPECT_EQ(BlocksDone(4095, 4096, 4), 3u);
  EXPECT_EQ(BlocksDone(4096, 4096, 4), 4u);
  // 4,194,304 blocks of 1 GiB: the product needs more than 64 bits.
  const uint64_t total = (uint64_t{1} << 30) * 4194304;
  EXPECT_EQ(BlocksDone(total / 2, total, 4194304), 2097152u);
}

// Everything ProgressBar wrote to a temporary file.
std::string Written(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string text;
  for (int c; (c = std::fgetc(f)) != EOF;) text += static_cast<char>(c);
  return text;
}

TEST(ProgressBarTest, RedrawsAtMostEvery100msExceptTheEnd) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  const absl::Time start = absl::FromUnixSeconds(1000);
  ProgressBar bar(f, 1000, start);
  bar.Update(100, start + absl::Seconds(1));
  bar.Update(200, start + absl::Seconds(1) + absl::Milliseconds(50));   // too soon: skipped
  bar.Update(1000, start + absl::Seconds(1) + absl::Milliseconds(60));  // the end: drawn
  const std::string text = Written(f);
  EXPECT_NE(text.find(" 10.0%  100 B / 1000 B  100 B/s\033[K"), std::string::npos) << text;
  EXPECT_EQ(text.find("20.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("100.0%  1000 B / 1000 B"), std::string::npos) << text;
  EXPECT_EQ(text[0], '\r');
  std::fclose(f);
}

TEST(ProgressBarTest, ClearErasesOnlyADrawnLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ProgressBar bar(f, 10, absl::Now());
  bar.Clear();
  EXPECT_EQ(Written(f), "");
  bar.Update(5, absl::Now());
  bar.Clear();
  bar.Clear();
  const std::string text = Written(f);
  EXPECT_EQ(text.substr(text.size() - 4), "\r\033[K");
  EXPECT_EQ(text.find("\r\033[K\r\033[K"), std::string::npos) << "cleared twice";
  std::fclose(f);
}

TEST(ProgressBarTest, ShowsBlocksOfAManyBlockTransfer) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  const absl::Time start = absl::FromUnixSeconds(1000);
  ProgressBar bar(f, 1000, start, 10);
  bar.Update(500, start + absl::Seconds(1));
  bar.Update(1000, start + absl::Seconds(2));
  const std::string text = Written(f);
  EXPECT_NE(text.find("500 B / 1000 B  500 B/s  5/10 blocks\033[K"), std::string::npos) << text;
  EXPECT_NE(text.find("1000 B / 1000 B  500 B/s  10/10 blocks\033[K"), std::string::npos) << text;
  std::fclose(f);
}

}  // namespace
}  // namespace xferd::client
