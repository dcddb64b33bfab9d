// Parsing and printing of human-friendly sizes ("64KiB", "1g") and rates, shared
// by the config loader, xferctl and the benchmarks.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace xferd {

// Parses "4096", "64k", "64KiB", "1M", "1.5GiB" (binary multiples; "KB" and
// "kB" are accepted as 1024 too, as users mean). Errors: INVALID_ARGUMENT.
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

// Parses "250ms", "10s", "1m" (absl::ParseDuration syntax), refusing negatives.
absl::StatusOr<absl::Duration> ParseDurationText(absl::string_view text);

// "1.00 GiB", "64.0 KiB", "512 B".
std::string FormatBytes(uint64_t bytes);

// Bytes per second as "2.41 GB/s" (decimal, as network figures are quoted).
std::string FormatRate(double bytes_per_second);

}  // namespace xferd
