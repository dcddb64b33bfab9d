#include "client/cpp/progress_bar.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "daemon/base/units.h"
#include "client/cpp/format.h"

namespace xferd::client {
namespace {

// Redraw pace: smooth to the eye, cheap on a slow terminal.
constexpr absl::Duration kMinRedraw = absl::Milliseconds(100);
// Cells of the bar itself; the whole line stays under 80 columns.
constexpr int kBarWidth = 30;

}  // namespace

std::string RenderProgress(uint64_t done, uint64_t total, double bytes_per_second, int bar_width) {
  const double fraction =
      total == 0 ? 0.0 : std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
  const int filled = static_cast<int>(fraction * bar_width);
  std::string bar(static_cast<size_t>(filled), '#');
  if (filled < bar_width) {
    bar += '>';
    bar.resize(static_cast<size_t>(bar_width), ' ');
  }
  const std::string rate = bytes_per_second > 0 ? FormatRate(bytes_per_second) : "-";
  return absl::StrFormat("[%s] %6s  %s / %s  %s", bar, Percent(done, total), FormatBytes(done),
                         FormatBytes(total), rate);
}

ProgressBar::ProgressBar(std::FILE* out, uint64_t total, absl::Time start)
    : out_(out), total_(total), start_(start) {}

void ProgressBar::Update(uint64_t done, absl::Time now) {
  if (done < total_ && now - last_draw_ < kMinRedraw) return;
  last_draw_ = now;
  const double seconds = absl::ToDoubleSeconds(now - start_);
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  // "\033[K" erases what a longer previous line left behind.
  std::fprintf(out_, "\r%s\033[K", RenderProgress(done, total_, rate, kBarWidth).c_str());
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
