// The /metrics endpoint (libmicrohttpd with xferd's handler) over real
// loopback sockets: the exposition and its headers, gzip, HEAD, refused
// methods and paths, the index page, bind errors, IPv6, that stopping closes
// the listener, and HTTPS: a scrape through TLS, plain HTTP refused, client
// certificates required of the right CA, and the TLS files checked at load.
#include "daemon/metrics/metrics_endpoint.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <prometheus/metric_family.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/openssl_util.h"
#include "daemon/common/unique_fd.h"
#include "tests/testing/test_certs.h"

namespace xferd::metrics {
namespace {

// Sends `request` to 127.0.0.1:port and returns everything the server sent
// back before closing, or "" if it could not connect.
UniqueFd Connect(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return UniqueFd();
  return fd;
}

std::string Exchange(uint16_t port, const std::string& request) {
  UniqueFd fd = Connect(port);
  if (!fd.valid()) return "";
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

// ---- HTTPS ---------------------------------------------------------------------

// GET `path` over TLS from 127.0.0.1:port, verifying the server as
// "localhost" against `ca`, presenting `client` if given. Everything the
// server sent before closing, or "" if the handshake or the exchange failed
// (with TLS 1.3 a refused client certificate shows on the first read).
std::string TlsGet(uint16_t port, const std::string& ca, const testing::TestCert* client,
                   const std::string& path = "/metrics", const std::string& headers = "") {
  UniqueSslCtx ctx(SSL_CTX_new(TLS_client_method()));
  EXPECT_EQ(SSL_CTX_load_verify_locations(ctx.get(), ca.c_str(), nullptr), 1);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (client != nullptr) {
    EXPECT_EQ(SSL_CTX_use_certificate_chain_file(ctx.get(), client->cert.c_str()), 1);
    EXPECT_EQ(SSL_CTX_use_PrivateKey_file(ctx.get(), client->key.c_str(), SSL_FILETYPE_PEM), 1);
  }
  UniqueFd fd = Connect(port);
  if (!fd.valid()) return "";
  UniqueSsl ssl(SSL_new(ctx.get()));
  SSL_set1_host(ssl.get(), "localhost");
  SSL_set_tlsext_host_name(ssl.get(), "localhost");
  SSL_set_fd(ssl.get(), fd.get());
  std::string reply;
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: localhost\r\n",
                                           headers, "Connection: close\r\n\r\n");
  if (SSL_connect(ssl.get()) == 1 &&
      SSL_write(ssl.get(), request.data(), static_cast<int>(request.size())) > 0) {
    char buf[4096];
    int n;
    while ((n = SSL_read(ssl.get(), buf, sizeof(buf))) > 0) reply.append(buf, n);
  }
  ERR_clear_error();
  return reply;
}

// Certificates made once for the suite: CA "ca" issues the server's and the
// client's, CA "other" a stranger's.
class MetricsEndpointTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A refused handshake closes the connection, maybe before the client's
    // request is written: EPIPE, not a signal that ends the test.
    std::signal(SIGPIPE, SIG_IGN);
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = new std::string(absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/metrics_tls"));
    ASSERT_EQ(std::system(absl::StrCat("rm -rf ", *dir_, "; mkdir -p ", *dir_).c_str()), 0);
    absl::StatusOr<testing::TestCa> ca = testing::TestCa::Create(*dir_, "ca");
    absl::StatusOr<testing::TestCa> other = testing::TestCa::Create(*dir_, "other");
    ASSERT_TRUE(ca.ok() && other.ok());
    absl::StatusOr<testing::TestCert> server = ca->IssueForDaemon("metrics");
    absl::StatusOr<testing::TestCert> client = ca->Issue("prometheus", "");
    absl::StatusOr<testing::TestCert> stranger = other->Issue("prometheus", "");
    ASSERT_TRUE(server.ok() && client.ok() && stranger.ok());
    certs_ = new Certs{ca->cert(), other->cert(), *server, *client, *stranger};
  }

  // The endpoint over HTTPS with the server certificate (and client CA).
  std::unique_ptr<MetricsEndpoint> StartTls(bool client_certificates, ScrapeSecurity s = {}) {
    MetricsConfig config;
    config.tls_cert = certs_->server.cert;
    config.tls_key = certs_->server.key;
    if (client_certificates) config.tls_client_ca = certs_->ca;
    absl::StatusOr<ScrapeSecurity> loaded = LoadScrapeSecurity(config);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (!loaded.ok()) return nullptr;
    s.cert_pem = loaded->cert_pem;
    s.key_pem = loaded->key_pem;
    s.client_ca_pem = loaded->client_ca_pem;
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
        MetricsEndpoint::Start("127.0.0.1:0", collectable_, std::move(s));
    EXPECT_TRUE(endpoint.ok()) << endpoint.status();
    return endpoint.ok() ? *std::move(endpoint) : nullptr;
  }

  struct Certs {
    std::string ca, other_ca;
    testing::TestCert server, client, stranger;
  };
  static inline std::string* dir_ = nullptr;
  static inline Certs* certs_ = nullptr;
  std::shared_ptr<FakeCollectable> collectable_ = std::make_shared<FakeCollectable>();
};

TEST_F(MetricsEndpointTlsTest, ScrapesOverHttpsAndRefusesPlainHttp) {
  std::unique_ptr<MetricsEndpoint> endpoint = StartTls(/*client_certificates=*/false);
  ASSERT_NE(endpoint, nullptr);
  EXPECT_STREQ(endpoint->scheme(), "https");
  const std::string reply = TlsGet(endpoint->port(), certs_->ca, nullptr);
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200 OK\r\n")) << reply;
  EXPECT_TRUE(absl::StrContains(Body(reply), "\nup 1\n")) << reply;
  // Plain HTTP gets no HTTP answer, and is not collected.
  EXPECT_FALSE(absl::StrContains(Get(endpoint->port(), "GET", "/metrics"), "HTTP/1.1"));
  // A client that trusts another CA refuses the server.
  EXPECT_EQ(TlsGet(endpoint->port(), certs_->other_ca, nullptr), "");
  EXPECT_EQ(collectable_->scrapes.load(), 1);
}

TEST_F(MetricsEndpointTlsTest, ClientCertificatesOfTheCaAreRequired) {
  std::unique_ptr<MetricsEndpoint> endpoint = StartTls(/*client_certificates=*/true);
  ASSERT_NE(endpoint, nullptr);
  EXPECT_EQ(TlsGet(endpoint->port(), certs_->ca, nullptr), "");            // none
  EXPECT_EQ(TlsGet(endpoint->port(), certs_->ca, &certs_->stranger), "");  // another CA's
  EXPECT_EQ(collectable_->scrapes.load(), 0);
  const std::string reply = TlsGet(endpoint->port(), certs_->ca, &certs_->client);
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200 OK\r\n")) << reply;
  EXPECT_EQ(collectable_->scrapes.load(), 1);
}

TEST_F(MetricsEndpointTlsTest, CredentialsOverHttps) {
  ScrapeSecurity auth;
  auth.bearer_token = "t0ken";
  std::unique_ptr<MetricsEndpoint> endpoint = StartTls(/*client_certificates=*/true, auth);
  ASSERT_NE(endpoint, nullptr);
  const std::string refused = TlsGet(endpoint->port(), certs_->ca, &certs_->client);
  EXPECT_TRUE(absl::StartsWith(refused, "HTTP/1.1 401 ")) << refused;
  EXPECT_TRUE(absl::StrContains(refused, "WWW-Authenticate: Bearer")) << refused;
  const std::string reply = TlsGet(endpoint->port(), certs_->ca, &certs_->client, "/metrics",
                                   "Authorization: Bearer t0ken\r\n");
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200 OK\r\n")) << reply;
}

TEST_F(MetricsEndpointTlsTest, BadFilesNameTheirKey) {
  const auto error = [](const MetricsConfig& config) {
    return std::string(LoadScrapeSecurity(config).status().message());
  };
  MetricsConfig mismatched;
  mismatched.tls_cert = certs_->server.cert;
  mismatched.tls_key = certs_->client.key;
  EXPECT_TRUE(absl::StrContains(error(mismatched), "'metrics.tls_key'")) << error(mismatched);
  EXPECT_TRUE(absl::StrContains(error(mismatched), "does not match")) << error(mismatched);
  MetricsConfig not_a_cert;
  not_a_cert.tls_cert = certs_->server.key;
  not_a_cert.tls_key = certs_->server.key;
  EXPECT_TRUE(absl::StrContains(error(not_a_cert), "'metrics.tls_cert'")) << error(not_a_cert);
  MetricsConfig not_a_key;
  not_a_key.tls_cert = certs_->server.cert;
  not_a_key.tls_key = certs_->server.cert;
  EXPECT_TRUE(absl::StrContains(error(not_a_key), "'metrics.tls_key'")) << error(not_a_key);
  MetricsConfig not_a_ca;
  not_a_ca.tls_cert = certs_->server.cert;
  not_a_ca.tls_key = certs_->server.key;
  not_a_ca.tls_client_ca = certs_->server.key;
  EXPECT_TRUE(absl::StrContains(error(not_a_ca), "'metrics.tls_client_ca'")) << error(not_a_ca);
  // Start checks PEM text given directly as well.
  ScrapeSecurity half;
  half.cert_pem = testing::ReadTestFile(certs_->server.cert);
  EXPECT_EQ(MetricsEndpoint::Start("127.0.0.1:0", collectable_, half).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace xferd::metrics
