// The /metrics HTTP endpoint over real loopback sockets: status codes,
// headers, bodies, HEAD, bad methods and paths, bind errors and stopping.
#include "daemon/metrics/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/unique_fd.h"

namespace xferd::metrics {
namespace {

// Sends `request` to 127.0.0.1:port and returns everything the server sent
// back before closing, or "" if it could not connect.
std::string Exchange(uint16_t port, const std::string& request) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return "";
  EXPECT_EQ(::write(fd.get(), request.data(), request.size()),
            static_cast<ssize_t>(request.size()));
  std::string reply;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof(buf))) > 0) reply.append(buf, n);
  return reply;
}

std::string Get(uint16_t port, const std::string& method, const std::string& path) {
  return Exchange(
      port, absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
}

std::string Body(const std::string& reply) {
  const size_t end = reply.find("\r\n\r\n");
  return end == std::string::npos ? "" : reply.substr(end + 4);
}

class MetricsHttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
        MetricsHttpServer::Start("127.0.0.1:0", [this] {
          ++scrapes_;
          return std::string("# HELP up Up.\n# TYPE up gauge\nup 1\n");
        });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  std::atomic<int> scrapes_{0};
  std::unique_ptr<MetricsHttpServer> server_;
};

TEST_F(MetricsHttpServerTest, ServesTheExpositionAtMetrics) {
  ASSERT_NE(server_->port(), 0);
  EXPECT_EQ(server_->address(), absl::StrCat("127.0.0.1:", server_->port()));
  const std::string reply = Get(server_->port(), "GET", "/metrics");
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200 OK\r\n")) << reply;
  EXPECT_TRUE(
      absl::StrContains(reply, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"))
      << reply;
  EXPECT_EQ(Body(reply), "# HELP up Up.\n# TYPE up gauge\nup 1\n");
  EXPECT_EQ(scrapes_.load(), 1);
}

TEST_F(MetricsHttpServerTest, HeadHasHeadersButNoBody) {
  const std::string reply = Get(server_->port(), "HEAD", "/metrics");
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200 OK\r\n")) << reply;
  EXPECT_EQ(Body(reply), "");
}

TEST_F(MetricsHttpServerTest, OtherPathsAndMethodsAreRefused) {
  EXPECT_TRUE(absl::StartsWith(Get(server_->port(), "GET", "/nope"), "HTTP/1.1 404 "));
  EXPECT_TRUE(absl::StartsWith(Get(server_->port(), "GET", "/metrics/x"), "HTTP/1.1 404 "));
  const std::string post = Exchange(
      server_->port(),
      "POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_TRUE(absl::StartsWith(post, "HTTP/1.1 405 ")) << post;
  EXPECT_TRUE(absl::StrContains(post, "Allow: GET, HEAD\r\n")) << post;
  const std::string index = Get(server_->port(), "GET", "/");
  EXPECT_TRUE(absl::StartsWith(index, "HTTP/1.1 200 ")) << index;
  EXPECT_TRUE(absl::StrContains(index, "href=\"/metrics\""));
  EXPECT_EQ(scrapes_.load(), 0);  // only /metrics renders
}

TEST_F(MetricsHttpServerTest, ManyScrapesInARow) {
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(Body(Get(server_->port(), "GET", "/metrics")),
              "# HELP up Up.\n# TYPE up gauge\nup 1\n");
  }
  EXPECT_EQ(scrapes_.load(), 50);
}

TEST_F(MetricsHttpServerTest, StopClosesTheListenerAndIsIdempotent) {
  const uint16_t port = server_->port();
  server_->Stop();
  server_->Stop();
  EXPECT_EQ(Get(port, "GET", "/metrics"), "");  // connection refused
}

TEST(MetricsHttpServerStartTest, ReportsBadAddressesAndTakenPorts) {
  auto render = [] { return std::string(); };
  EXPECT_EQ(MetricsHttpServer::Start("no-port", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsHttpServer::Start("127.0.0.1:99999", render).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = MetricsHttpServer::Start("127.0.0.1:0", render);
  ASSERT_TRUE(first.ok());
  absl::Status taken =
      MetricsHttpServer::Start(absl::StrCat("127.0.0.1:", (*first)->port()), render).status();
  EXPECT_EQ(taken.code(), absl::StatusCode::kUnavailable) << taken;
  EXPECT_TRUE(absl::StrContains(taken.message(), "metrics.listen")) << taken;
}

}  // namespace
}  // namespace xferd::metrics
