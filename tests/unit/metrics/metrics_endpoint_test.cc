// The /metrics endpoint (libmicrohttpd with xferd's handler) over real
// loopback sockets: the exposition and its headers, gzip, HEAD, refused
// methods and paths, the index page, bind errors, IPv6, and that stopping
// closes the listener.
#include "daemon/metrics/metrics_endpoint.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <prometheus/metric_family.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

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

// One gauge, `up 1`; counts its scrapes.
class FakeCollectable : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    ++scrapes;
    prometheus::MetricFamily up{"up", "Up.", prometheus::MetricType::Gauge, {}};
    up.metric.emplace_back().gauge.value = 1;
    return {up};
  }
  mutable std::atomic<int> scrapes{0};
};

class MetricsEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
        MetricsEndpoint::Start("127.0.0.1:0", collectable_);
    ASSERT_TRUE(endpoint.ok()) << endpoint.status();
    endpoint_ = *std::move(endpoint);
  }

  std::shared_ptr<FakeCollectable> collectable_ = std::make_shared<FakeCollectable>();
  std::unique_ptr<MetricsEndpoint> endpoint_;
};

TEST_F(MetricsEndpointTest, ServesTheCollectableAtMetrics) {
  ASSERT_NE(endpoint_->port(), 0);
  EXPECT_EQ(endpoint_->address(), absl::StrCat("127.0.0.1:", endpoint_->port()));
  const std::string reply = Get(endpoint_->port(), "GET", "/metrics");
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200 OK\r\n")) << reply;
  EXPECT_TRUE(
      absl::StrContains(reply, absl::StrCat("Content-Type: ", kExpositionContentType, "\r\n")))
      << reply;
  EXPECT_TRUE(absl::StrContains(Body(reply), "# HELP up Up.\n# TYPE up gauge\nup 1\n")) << reply;
  EXPECT_EQ(collectable_->scrapes.load(), 1);
}

TEST_F(MetricsEndpointTest, HeadHasTheContentTypeButNoBody) {
  const std::string reply = Get(endpoint_->port(), "HEAD", "/metrics");
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200 OK\r\n")) << reply;
  EXPECT_TRUE(
      absl::StrContains(reply, absl::StrCat("Content-Type: ", kExpositionContentType, "\r\n")))
      << reply;
  EXPECT_EQ(Body(reply), "");
  EXPECT_EQ(collectable_->scrapes.load(), 0);
}

TEST_F(MetricsEndpointTest, OtherPathsAndMethodsAreRefused) {
  EXPECT_TRUE(absl::StartsWith(Get(endpoint_->port(), "GET", "/nope"), "HTTP/1.1 404 "));
  EXPECT_TRUE(absl::StartsWith(Get(endpoint_->port(), "GET", "/metrics/x"), "HTTP/1.1 404 "));
  const std::string post = Exchange(
      endpoint_->port(),
      "POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_TRUE(absl::StartsWith(post, "HTTP/1.1 405 ")) << post;
  EXPECT_TRUE(absl::StrContains(post, "Allow: GET, HEAD\r\n")) << post;
  const std::string index = Get(endpoint_->port(), "GET", "/");
  EXPECT_TRUE(absl::StartsWith(index, "HTTP/1.1 200 ")) << index;
  EXPECT_TRUE(absl::StrContains(index, "href=\"/metrics\""));
  EXPECT_EQ(collectable_->scrapes.load(), 0);  // only GET /metrics collects
}

TEST_F(MetricsEndpointTest, ManyScrapesInARow) {
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(absl::StrContains(Body(Get(endpoint_->port(), "GET", "/metrics")), "\nup 1\n"));
  }
  EXPECT_EQ(collectable_->scrapes.load(), 50);
}

TEST_F(MetricsEndpointTest, ACollectableGoneFirstIsLeftOut) {
  collectable_.reset();  // the endpoint holds only a weak_ptr
  const std::string reply = Get(endpoint_->port(), "GET", "/metrics");
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200 OK\r\n")) << reply;
  EXPECT_FALSE(absl::StrContains(Body(reply), "\nup 1\n")) << reply;
}

TEST_F(MetricsEndpointTest, DestroyingItClosesTheListener) {
  const uint16_t port = endpoint_->port();
  endpoint_.reset();
  EXPECT_EQ(Get(port, "GET", "/metrics"), "");  // connection refused
}

TEST(MetricsEndpointStartTest, ReportsBadAddressesAndTakenPorts) {
  auto collectable = std::make_shared<FakeCollectable>();
  EXPECT_EQ(MetricsEndpoint::Start("no-port", collectable).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsEndpoint::Start("127.0.0.1:99999", collectable).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = MetricsEndpoint::Start("127.0.0.1:0", collectable);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::Status taken =
      MetricsEndpoint::Start(absl::StrCat("127.0.0.1:", (*first)->port()), collectable).status();
  EXPECT_EQ(taken.code(), absl::StatusCode::kUnavailable) << taken;
  EXPECT_TRUE(absl::StrContains(taken.message(), "metrics.listen")) << taken;
  EXPECT_TRUE(absl::StrContains(taken.message(), "in use")) << taken;  // the bind error
}

TEST(MetricsEndpointStartTest, ServesIpv6) {
  {
    UniqueFd probe(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in6 loopback{};
    loopback.sin6_family = AF_INET6;
    loopback.sin6_addr = in6addr_loopback;
    if (!probe.valid() ||
        ::bind(probe.get(), reinterpret_cast<sockaddr*>(&loopback), sizeof(loopback)) != 0) {
      GTEST_SKIP() << "no IPv6 loopback here";
    }
  }
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> v6 =
      MetricsEndpoint::Start("[::1]:0", std::make_shared<FakeCollectable>());
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ((*v6)->address(), absl::StrCat("[::1]:", (*v6)->port()));
}

TEST_F(MetricsEndpointTest, GzipWhenAsked) {
  const std::string reply = Exchange(
      endpoint_->port(),
      "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200 OK\r\n")) << reply;
  EXPECT_TRUE(absl::StrContains(reply, "Content-Encoding: gzip\r\n")) << reply;
  EXPECT_TRUE(absl::StartsWith(Body(reply), "\x1f\x8b")) << reply;  // gzip's magic
}

TEST_F(MetricsEndpointTest, CountsItsOwnScrapes) {
  Get(endpoint_->port(), "GET", "/metrics");
  const std::string body = Body(Get(endpoint_->port(), "GET", "/metrics"));
  EXPECT_TRUE(absl::StrContains(body, "\nexposer_scrapes_total 1\n")) << body;
  EXPECT_TRUE(absl::StrContains(body, "# TYPE exposer_request_latencies summary\n")) << body;
  EXPECT_TRUE(absl::StrContains(body, "# TYPE exposer_transferred_bytes_total counter\n")) << body;
}

}  // namespace
}  // namespace xferd::metrics
