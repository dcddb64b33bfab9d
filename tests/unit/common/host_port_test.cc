#include "daemon/common/host_port.h"

#include <gtest/gtest.h>

namespace xferd {
namespace {

TEST(HostPortTest, ParsesNamesAndAddresses) {
  const struct {
    const char* text;
    const char* host;
    uint16_t port;
  } kCases[] = {
      {"127.0.0.1:7300", "127.0.0.1", 7300},
      {"[::1]:0", "::1", 0},
      {"localhost:65535", "localhost", 65535},
      {":9300", "", 9300},  // any address
  };
  for (const auto& c : kCases) {
    absl::StatusOr<HostPort> parsed = ParseHostPort(c.text);
    ASSERT_TRUE(parsed.ok()) << c.text << ": " << parsed.status();
    EXPECT_EQ(parsed->host, c.host) << c.text;
    EXPECT_EQ(parsed->port, c.port) << c.text;
  }
}

TEST(HostPortTest, RefusesWithTheExpectedForm) {
  for (const char* bad : {"nohost", "host:", "host:99999", "[::1]7300", "[::1", "h:p"}) {
    absl::StatusOr<HostPort> parsed = ParseHostPort(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(parsed.status().message().find(bad), absl::string_view::npos)
        << parsed.status().message();
  }
  EXPECT_NE(ParseHostPort("nohost").status().message().find("want host:port"),
            absl::string_view::npos);
  EXPECT_NE(ParseHostPort("[::1]7300").status().message().find("want [v6]:port"),
            absl::string_view::npos);
}

TEST(HostPortTest, FormatsBracketingIpv6) {
  EXPECT_EQ(FormatHostPort({"10.0.0.1", 7300}), "10.0.0.1:7300");
  EXPECT_EQ(FormatHostPort({"node-b", 0}), "node-b:0");
  EXPECT_EQ(FormatHostPort({"fe80::1", 9300}), "[fe80::1]:9300");
  for (const char* text : {"127.0.0.1:7300", "[::1]:1", "host:65535"}) {
    absl::StatusOr<HostPort> parsed = ParseHostPort(text);
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_EQ(FormatHostPort(*parsed), text);
  }
}

}  // namespace
}  // namespace xferd
