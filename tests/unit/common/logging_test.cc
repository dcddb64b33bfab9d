#include "daemon/common/logging.h"

#include <gtest/gtest.h>

#include "daemon/common/log.h"

namespace xferd {
namespace {

TEST(LoggingTest, AcceptsLevelsAndRejectsUnknown) {
  EXPECT_TRUE(SetupLogging("debug", false).ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
  EXPECT_TRUE(SetupLogging("warn", true).ok());
  EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);
  EXPECT_EQ(SetupLogging("chatty", false).code(), absl::StatusCode::kInvalidArgument);
}

TEST(LoggingTest, JsonLinesEscapeTheMessage) {
  ASSERT_TRUE(SetupLogging("info", true).ok());
  testing::internal::CaptureStderr();
  spdlog::info("quote \" backslash \\ newline \n tab \t {}",
               absl::Status(absl::StatusCode::kNotFound, "x"));
  spdlog::default_logger()->flush();
  const std::string line = testing::internal::GetCapturedStderr();
  EXPECT_NE(line.find(R"("msg":"quote \" backslash \\ newline \n tab \t NOT_FOUND: x")"),
            std::string::npos)
      << line;
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per message";
}

}  // namespace
}  // namespace xferd
