#include "client/cpp/progress_bar.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/base/units.h"
#include "client/cpp/format.h"

namespace xferd::client {
namespace {

// Redraw pace: smooth to the eye, cheap on a slow terminal.
constexpr absl::Duration kMinRedraw = absl::Milliseconds(100);
// Cells of the bar itself; the whole line stays under 80 columns, with the
// block count (up to "4194304/4194304 blocks") when there is one.
constexpr int kBarWidth = 30;
constexpr int kBarWidthWithBlocks = 12;

}  // namespace

std::string RenderProgress(uint64_t done, uint64_t total, double bytes_per_second, int bar_width,
                           BlockCount blocks) {
  const double fraction =
      total == 0 ? 0.0 : std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
  const int filled = static_cast<int>(fraction * bar_width);
  std::string bar(static_cast<size_t>(filled), '#');
  if (filled < bar_width) {
    bar += '>';
    bar.resize(static_cast<size_t>(bar_width), ' ');
  }
  const std::string rate = bytes_per_second > 0 ? FormatRate(bytes_per_second) : "-";
  std::string line = absl::StrFormat("[%s] %6s  %s / %s  %s", bar, Percent(done, total),
                                     FormatBytes(done), FormatBytes(total), rate);
  if (blocks.total > 1) absl::StrAppend(&line, "  ", blocks.done, "/", blocks.total, " blocks");
  return line;
}

uint64_t BlocksDone(uint64_t bytes_done, uint64_t bytes_total, uint64_t blocks_total) {
  if (bytes_total == 0 || bytes_done >= bytes_total) return bytes_done > 0 ? blocks_total : 0;
  // 128 bits: blocks x bytes exceeds 64 bits for large transfers.
  return static_cast<uint64_t>(static_cast<unsigned __int128>(blocks_total) * bytes_done /
                               bytes_total);
}

ProgressBar::ProgressBar(std::FILE* out, uint64_t total, absl::Time start, uint64_t blocks)
    : out_(out), total_(total), blocks_(blocks), start_(start) {}

void ProgressBar::Update(uint64_t done, absl::Time now) {
  if (done < total_ && now - last_draw_ < kMinRedraw) return;
  last_draw_ = now;
  const double seconds = absl::ToDoubleSeconds(now - start_);
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  // "\033[K" erases what a longer previous line left behind.
  const BlockCount blocks{BlocksDone(done, total_, blocks_), blocks_};
  const int width = blocks_ > 1 ? kBarWidthWithBlocks : kBarWidth;
  std::fprintf(out_, "\r%s\033[K", RenderProgress(done, total_, rate, width, blocks).c_str());
  std::fflush(out_);
  drawn_ = true;
}

void ProgressBar::Clear() {
  if (!drawn_) return;
  std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace xferd::client
