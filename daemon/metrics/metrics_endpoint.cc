#include "daemon/metrics/metrics_endpoint.h"

#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <zlib.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/host_port.h"
#include "daemon/common/log.h"

namespace xferd::metrics {
namespace {

// Scrapes are rare, small and done in milliseconds: two server threads serve
// a few Prometheus servers and curls, a client that sends nothing for this
// long is dropped, and a connection flood finds a bound.
constexpr unsigned kServerThreads = 2;
constexpr unsigned kConnectionTimeoutS = 10;
constexpr unsigned kConnectionLimit = 64;
// TLS 1.2 and 1.3 only, as Prometheus' tls_config asks by default.
constexpr char kTlsPriorities[] = "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2";

constexpr char kIndex[] =
    "<html><head><title>xferd</title></head><body>"
    "<p>xferd: Prometheus metrics at <a href=\"/metrics\">/metrics</a></p></body></html>\n";
constexpr char kRealm[] = "realm=\"xferd metrics\"";

// ---- requests ----------------------------------------------------------------

const char* Header(MHD_Connection* conn, const char* name) {
  return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

gnutls_session_t TlsSession(MHD_Connection* conn) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  return info == nullptr ? nullptr : static_cast<gnutls_session_t>(info->tls_session);
}

// Each new TLS connection, before its handshake: require a client
// certificate that the trusted CAs (MHD_OPTION_HTTPS_MEM_TRUST) verify, so a
// client without one fails the handshake and never reaches the HTTP parser.
// libmicrohttpd itself only requests one.
void RequireClientCertificate(void*, MHD_Connection* conn, void**,
                              MHD_ConnectionNotificationCode code) {
  if (code != MHD_CONNECTION_NOTIFY_STARTED) return;
  if (gnutls_session_t session = TlsSession(conn); session != nullptr) {
    gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_cert(session, nullptr, 0);
  }
}

// The same rule once more per request, in case a library change ever let a
// handshake through: a verified client certificate.
bool ClientCertificateVerified(MHD_Connection* conn) {
  gnutls_session_t session = TlsSession(conn);
  unsigned status = 0;
  return session != nullptr && gnutls_certificate_verify_peers2(session, &status) == 0 &&
         status == 0;
}

std::string GzipCompress(absl::string_view input) {
  z_stream zs{};
  // 16 + 15: a gzip wrapper around the largest window.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return "";
  }
  std::string output(deflateBound(&zs, input.size()), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  zs.avail_in = static_cast<uInt>(input.size());
  zs.next_out = reinterpret_cast<Bytef*>(output.data());
  zs.avail_out = static_cast<uInt>(output.size());
  const int rc = deflate(&zs, Z_FINISH);
  output.resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END ? output : "";
}

// For HEAD /metrics: headers only, no collection (the body is never read).
ssize_t NoBody(void*, uint64_t, char*, size_t) { return MHD_CONTENT_READER_END_OF_STREAM; }

}  // namespace

// ---- the server ----------------------------------------------------------------

struct MetricsEndpoint::Server {
  Server(std::weak_ptr<prometheus::Collectable> collectable, ScrapeSecurity security)
      : security(std::move(security)),
        collectable(std::move(collectable)),
        registry(std::make_shared<prometheus::Registry>()),
        // The endpoint's own families, as prometheus-cpp's Exposer names them.
        bytes(prometheus::BuildCounter()
                  .Name("exposer_transferred_bytes_total")
                  .Help("Transferred bytes to metrics services")
                  .Register(*registry)
                  .Add({})),
        scrapes(prometheus::BuildCounter()
                    .Name("exposer_scrapes_total")
                    .Help("Number of times metrics were scraped")
                    .Register(*registry)
                    .Add({})),
        latencies(
            prometheus::BuildSummary()
                .Name("exposer_request_latencies")
                .Help("Latencies of serving scrape requests, in microseconds")
                .Register(*registry)
                .Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}, {0.9, 0.01}, {0.99, 0.001}})) {
  }

  ~Server() {
    if (daemon != nullptr) MHD_stop_daemon(daemon);
  }

  // Every request, on a server thread.
  static MHD_Result Handle(void* cls, MHD_Connection* conn, const char* url, const char* method,
                           const char* version, const char* upload_data, size_t* upload_data_size,
                           void** request_context);
  // libmicrohttpd's messages: during Start the first one is the reason it
  // failed; afterwards they go to our log.
  static void Log(void* cls, const char* format, va_list args);

  MHD_Result Reply(MHD_Connection* conn, unsigned status, const char* content_type,
                   absl::string_view body, bool challenge = false) const;
  MHD_Result Scrape(MHD_Connection* conn);

  const ScrapeSecurity security;
  const std::weak_ptr<prometheus::Collectable> collectable;
  const std::shared_ptr<prometheus::Registry> registry;
  prometheus::Counter& bytes;
  prometheus::Counter& scrapes;
  prometheus::Summary& latencies;
  MHD_Daemon* daemon = nullptr;

  Mutex log_mu;
  std::string* start_error ABSL_GUARDED_BY(log_mu) = nullptr;
};

void MetricsEndpoint::Server::Log(void* cls, const char* format, va_list args) {
  char text[512];
  std::vsnprintf(text, sizeof(text), format, args);
  absl::string_view message = absl::StripTrailingAsciiWhitespace(text);
  // libmicrohttpd 0.9.75's words for every failed TLS handshake.
  if (message == "Error: received handshake message out of context.") {
    message =
        "a TLS handshake failed (plain HTTP, no client certificate or one no trusted CA signed, "
        "or no TLS version in common)";
  }
  auto* server = static_cast<Server*>(cls);
  MutexLock lock(&server->log_mu);
  if (server->start_error != nullptr) {
    if (server->start_error->empty()) *server->start_error = std::string(message);
  } else {
    spdlog::warn("metrics endpoint: {}", message);
  }
}

MHD_Result MetricsEndpoint::Server::Reply(MHD_Connection* conn, unsigned status,
                                          const char* content_type, absl::string_view body,
                                          bool challenge) const {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;  // out of memory: drop the connection
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  }
  if (challenge && !security.basic_password.empty()) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                            absl::StrCat("Basic ", kRealm).c_str());
  }
  if (challenge && !security.bearer_token.empty()) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                            absl::StrCat("Bearer ", kRealm).c_str());
  }
  const MHD_Result queued = MHD_queue_response(conn, status, response);
  MHD_destroy_response(response);
  return queued;
}

// GET /metrics: collect, render, gzip when asked, count.
MHD_Result MetricsEndpoint::Server::Scrape(MHD_Connection* conn) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<prometheus::MetricFamily> families = registry->Collect();
  if (std::shared_ptr<prometheus::Collectable> c = collectable.lock()) {
    std::vector<prometheus::MetricFamily> more = c->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  std::string body = prometheus::TextSerializer().Serialize(families);
  const char* accept = Header(conn, MHD_HTTP_HEADER_ACCEPT_ENCODING);
  bool gzipped = false;
  if (accept != nullptr && absl::StrContains(accept, "gzip")) {
    if (std::string compressed = GzipCompress(body); !compressed.empty()) {
      body = std::move(compressed);
      gzipped = true;
    }
  }
  MHD_Response* response =
      MHD_create_response_from_buffer(body.size(), body.data(), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, kExpositionContentType);
  if (gzipped) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
  const MHD_Result queued = MHD_queue_response(conn, MHD_HTTP_OK, response);
  MHD_destroy_response(response);
  latencies.Observe(static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                            std::chrono::steady_clock::now() - start)
                                            .count()));
  bytes.Increment(static_cast<double>(body.size()));
  scrapes.Increment();
  return queued;
}

// Refuses what lacks a client certificate or credentials (when required),
// then routes: GET/HEAD /metrics, the index at /, 404 and 405 for the rest.
// Every reply is queued on the first call, before any request body is read:
// libmicrohttpd then closes the connection after the reply. One request per
// connection costs a scrape nothing: an idle keep-alive connection would be
// dropped after kConnectionTimeoutS anyway, before the next scrape.
MHD_Result MetricsEndpoint::Server::Handle(void* cls, MHD_Connection* conn, const char* url,
                                           const char* method, const char*, const char*, size_t*,
                                           void**) {
  auto* server = static_cast<Server*>(cls);
  const ScrapeSecurity& security = server->security;
  if (!security.client_ca_pem.empty() && !ClientCertificateVerified(conn)) {
    return server->Reply(conn, MHD_HTTP_FORBIDDEN, "text/plain",
                         "forbidden: this endpoint needs a client certificate\n");
  }
  if (!security.Accepts(Header(conn, MHD_HTTP_HEADER_AUTHORIZATION))) {
    return server->Reply(conn, MHD_HTTP_UNAUTHORIZED, "text/plain",
                         "unauthorized: this endpoint needs basic auth or a bearer token\n",
                         /*challenge=*/true);
  }
  const absl::string_view verb = method;
  const absl::string_view path = url;
  const bool head = verb == MHD_HTTP_METHOD_HEAD;
  if (verb != MHD_HTTP_METHOD_GET && !head) {
    return server->Reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "only GET and HEAD\n");
  }
  if (path == "/metrics") {
    if (!head) return server->Scrape(conn);
    // The body's length is known only by rendering it: none is sent. Not
    // chunked either: libmicrohttpd 0.9.75 would send a HEAD reply's last
    // chunk ("0\r\n\r\n") as if it were a body.
    MHD_Response* response =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, &NoBody, nullptr, nullptr);
    if (response == nullptr) return MHD_NO;
    MHD_set_response_options(response, MHD_RF_HTTP_1_0_COMPATIBLE_STRICT, MHD_RO_END);
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, kExpositionContentType);
    const MHD_Result queued = MHD_queue_response(conn, MHD_HTTP_OK, response);
    MHD_destroy_response(response);
    return queued;
  }
  if (path == "/") return server->Reply(conn, MHD_HTTP_OK, "text/html; charset=utf-8", kIndex);
  return server->Reply(conn, MHD_HTTP_NOT_FOUND, "text/plain",
                       "not found: the metrics are at /metrics\n");
}


absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listen, std::weak_ptr<prometheus::Collectable> collectable,
    ScrapeSecurity security) {
  absl::StatusOr<HostPort> where = ParseHostPort(listen);
  if (!where.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("metrics.listen: ", where.status().message()));
  }
  RETURN_IF_ERROR(CheckScrapeTls(security, MetricsConfig{}));

  // A host name may have several addresses: the first that can be bound.
  // No host: every IPv4 address (as "0.0.0.0").
  addrinfo hints{};
  hints.ai_family = where->host.empty() ? AF_INET : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const std::string port = absl::StrCat(where->port);
  if (const int rc = getaddrinfo(where->host.empty() ? nullptr : where->host.c_str(), port.c_str(),
                                 &hints, &result);
      rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("metrics.listen: cannot resolve '", where->host, "': ", gai_strerror(rc)));
  }
  const std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(result, &freeaddrinfo);

  auto server = std::make_unique<Server>(std::move(collectable), std::move(security));
  const ScrapeSecurity& s = server->security;
  std::string error = "no address to bind";
  for (const addrinfo* ai = addresses.get(); ai != nullptr && server->daemon == nullptr;
       ai = ai->ai_next) {
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
    // An IPv6 wildcard takes IPv4 too, as Linux binds it by default.
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_DUAL_STACK;
    std::vector<MHD_OptionItem> options = {
        {MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr},
        {MHD_OPTION_THREAD_POOL_SIZE, kServerThreads, nullptr},
        {MHD_OPTION_CONNECTION_TIMEOUT, kConnectionTimeoutS, nullptr},
        {MHD_OPTION_CONNECTION_LIMIT, kConnectionLimit, nullptr},
    };
    if (s.tls()) {
      flags |= MHD_USE_TLS;
      options.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(s.cert_pem.c_str())});
      options.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(s.key_pem.c_str())});
      options.push_back({MHD_OPTION_HTTPS_PRIORITIES, 0, const_cast<char*>(kTlsPriorities)});
      if (!s.client_ca_pem.empty()) {
        options.push_back(
            {MHD_OPTION_HTTPS_MEM_TRUST, 0, const_cast<char*>(s.client_ca_pem.c_str())});
        options.push_back({MHD_OPTION_NOTIFY_CONNECTION,
                           reinterpret_cast<intptr_t>(&RequireClientCertificate), nullptr});
      }
    }
    options.push_back({MHD_OPTION_END, 0, nullptr});

    std::string reason;
    {
      MutexLock lock(&server->log_mu);
      server->start_error = &reason;
    }
    // The logger first: libmicrohttpd logs to stderr until it has one.
    server->daemon = MHD_start_daemon(flags, 0, nullptr, nullptr, &Server::Handle, server.get(),
                                      MHD_OPTION_EXTERNAL_LOGGER, &Server::Log, server.get(),
                                      MHD_OPTION_ARRAY, options.data(), MHD_OPTION_END);
    {
      MutexLock lock(&server->log_mu);
      server->start_error = nullptr;
    }
    if (server->daemon == nullptr) error = reason.empty() ? "libmicrohttpd did not start" : reason;
  }
  if (server->daemon == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("metrics.listen: cannot listen on ", listen, ": ", error));
  }
  const MHD_DaemonInfo* info = MHD_get_daemon_info(server->daemon, MHD_DAEMON_INFO_BIND_PORT);
  const uint16_t bound = info != nullptr ? info->port : where->port;
  return std::unique_ptr<MetricsEndpoint>(
      new MetricsEndpoint(std::move(server), FormatHostPort({where->host, bound}), bound));
}

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<Server> server, std::string address, uint16_t port)
    : server_(std::move(server)), address_(std::move(address)), port_(port) {}

MetricsEndpoint::~MetricsEndpoint() = default;  // ~Server stops the daemon first

const char* MetricsEndpoint::scheme() const { return server_->security.tls() ? "https" : "http"; }

}  // namespace xferd::metrics
