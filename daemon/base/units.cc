#include "daemon/base/units.h"

#include <cctype>
#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace xferd {
namespace {

// Returns the multiplier for a unit suffix, or 0 if it is not one.
uint64_t UnitMultiplier(absl::string_view unit) {
  const std::string u = absl::AsciiStrToLower(unit);
  if (u.empty() || u == "b") return 1;
  if (u == "k" || u == "kb" || u == "kib") return uint64_t{1} << 10;
  if (u == "m" || u == "mb" || u == "mib") return uint64_t{1} << 20;
  if (u == "g" || u == "gb" || u == "gib") return uint64_t{1} << 30;
  if (u == "t" || u == "tb" || u == "tib") return uint64_t{1} << 40;
  return 0;
}

}  // namespace

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  size_t split = 0;
  while (split < trimmed.size() &&
         (std::isdigit(static_cast<unsigned char>(trimmed[split])) || trimmed[split] == '.')) {
    ++split;
  }
  const absl::string_view number = trimmed.substr(0, split);
  const absl::string_view unit = absl::StripAsciiWhitespace(trimmed.substr(split));
  const uint64_t multiplier = UnitMultiplier(unit);
  double value = 0;
  if (number.empty() || multiplier == 0 || !absl::SimpleAtod(number, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid size '", text,
                     "': expected a number with an optional unit, e.g. 4096, 64KiB, 1GiB"));
  }
  const double bytes = value * static_cast<double>(multiplier);
  if (bytes >= static_cast<double>(std::numeric_limits<uint64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat("size '", text, "' is too large"));
  }
  if (bytes != std::floor(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("size '", text, "' is not a whole number of bytes"));
  }
  return static_cast<uint64_t>(bytes);
}

absl::StatusOr<absl::Duration> ParseDurationText(absl::string_view text) {
  absl::Duration d;
  if (!absl::ParseDuration(absl::StripAsciiWhitespace(text), &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid duration '", text, "': expected e.g. 250ms, 10s, 2m"));
  }
  if (d < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("duration '", text, "' is negative"));
  }
  return d;
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrCat(bytes, " B");
  return absl::StrFormat("%.2f %s", value, kUnits[unit]);
}

std::string FormatRate(double bytes_per_second) {
  if (bytes_per_second >= 1e9) return absl::StrFormat("%.2f GB/s", bytes_per_second / 1e9);
  if (bytes_per_second >= 1e6) return absl::StrFormat("%.1f MB/s", bytes_per_second / 1e6);
  if (bytes_per_second >= 1e3) return absl::StrFormat("%.1f kB/s", bytes_per_second / 1e3);
  return absl::StrFormat("%.0f B/s", bytes_per_second);
}

}  // namespace xferd
