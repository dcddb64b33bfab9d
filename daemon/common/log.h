// The one header daemon code includes to log: spdlog plus fmt formatters for
// the Abseil types that appear in log lines (Debian's absl::string_view is
// its own type, not std::string_view, so fmt does not know it).
#pragma once

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view s, FormatContext& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};

template <>
struct fmt::formatter<absl::Status> : fmt::formatter<fmt::string_view> {
  template <typename FormatContext>
  auto format(const absl::Status& status, FormatContext& ctx) const {
    const std::string text = status.ToString();
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(text), ctx);
  }
};
