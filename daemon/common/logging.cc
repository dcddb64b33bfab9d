#include "daemon/common/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace xferd {
namespace {

// %* in the JSON pattern: the message payload escaped as a JSON string body.
class JsonEscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    for (char c : absl::string_view(msg.payload.data(), msg.payload.size())) {
      switch (c) {
        case '"':
          Append(dest, "\\\"");
          break;
        case '\\':
          Append(dest, "\\\\");
          break;
        case '\n':
          Append(dest, "\\n");
          break;
        case '\r':
          Append(dest, "\\r");
          break;
        case '\t':
          Append(dest, "\\t");
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            snprintf(buf, sizeof(buf), "\\u%04x", c);
            Append(dest, buf);
          } else {
            dest.push_back(c);
          }
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapedMessage>();
  }

 private:
  static void Append(spdlog::memory_buf_t& dest, absl::string_view s) {
    dest.append(s.data(), s.data() + s.size());
  }
};

}  // namespace

absl::Status SetupLogging(absl::string_view level, bool json) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown log level '", level, "': use trace, debug, info, warn or error"));
  }
  auto logger =
      std::make_shared<spdlog::logger>("xferd", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (json) {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%f%z","level":"%l","thread":%t,"msg":"%*"})");
    logger->set_formatter(std::move(formatter));
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%L%$ [%t] %v");
  }
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  return absl::OkStatus();
}

}  // namespace xferd
