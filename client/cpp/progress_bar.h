// A live progress line for xferctl write on a terminal: bar, percent, bytes
// and throughput, redrawn in place with '\r'. RenderProgress is the pure
// formatting part; ProgressBar adds the drawing and its pacing.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/time/time.h"

namespace xferd::client {

// "[##########>         ]  52.3%  1.05 GiB / 2.00 GiB  1.21 GB/s" with a bar
// of `bar_width` cells between the brackets. Throughput "-" when unknown
// (bytes_per_second <= 0).
std::string RenderProgress(uint64_t done, uint64_t total, double bytes_per_second, int bar_width);

// Draws on `out`, which the caller has checked is a terminal. Not
// thread-safe: one thread updates it. Does not own `out`.
class ProgressBar {
 public:
  ProgressBar(std::FILE* out, uint64_t total, absl::Time start);
  // Redraws with `done` bytes (throughput averaged since start), at most
  // every 100 ms unless done == total.
  void Update(uint64_t done, absl::Time now);
  // Erases the line, leaving the cursor at its start. Idempotent.
  void Clear();

 private:
  std::FILE* const out_;
  const uint64_t total_;
  const absl::Time start_;
  absl::Time last_draw_ = absl::InfinitePast();
  bool drawn_ = false;
};

}  // namespace xferd::client
