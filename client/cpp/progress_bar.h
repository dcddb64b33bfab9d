// A live progress line for xferctl write and read on a terminal: bar,
// percent, bytes, throughput and, for a many-block transfer, blocks, redrawn
// in place with '\r'. RenderProgress is the pure formatting part;
// ProgressBar adds the drawing and its pacing.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/time/time.h"

namespace xferd::client {

// Blocks of a many-block transfer; a total of 0 or 1 is not shown.
struct BlockCount {
  uint64_t done = 0;
  uint64_t total = 0;
};

// "[##########>         ]  52.3%  1.05 GiB / 2.00 GiB  1.21 GB/s" with a bar
// of `bar_width` cells between the brackets, then "  512/1024 blocks" when
// blocks.total > 1. Throughput "-" when unknown (bytes_per_second <= 0).
std::string RenderProgress(uint64_t done, uint64_t total, double bytes_per_second, int bar_width,
                           BlockCount blocks = {});

// The blocks `bytes_done` of `bytes_total` amount to: exact for blocks of one
// length, a proportional estimate otherwise (the daemon acknowledges ops of
// merged and cut blocks, not request blocks); all of them only when every
// byte is done.
uint64_t BlocksDone(uint64_t bytes_done, uint64_t bytes_total, uint64_t blocks_total);

// Draws on `out`, which the caller has checked is a terminal. Not
// thread-safe: one thread updates it. Does not own `out`.
class ProgressBar {
 public:
  // `blocks` > 1: a many-block transfer of that many blocks, shown too.
  ProgressBar(std::FILE* out, uint64_t total, absl::Time start, uint64_t blocks = 0);
  // Redraws with `done` bytes (throughput averaged since start) and the
  // blocks they amount to, at most every 100 ms unless done == total.
  void Update(uint64_t done, absl::Time now);
  // Erases the line, leaving the cursor at its start. Idempotent.
  void Clear();

 private:
  std::FILE* const out_;
  const uint64_t total_;
  const uint64_t blocks_;
  const absl::Time start_;
  absl::Time last_draw_ = absl::InfinitePast();
  bool drawn_ = false;
};

}  // namespace xferd::client
