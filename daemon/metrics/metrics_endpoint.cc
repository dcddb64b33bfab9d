#include "daemon/metrics/metrics_endpoint.h"

#include <CivetServer.h>
#include <civetweb.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <prometheus/exposer.h>

#include <exception>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "daemon/base/mutex.h"
#include "daemon/common/check.h"
#include "daemon/common/host_port.h"
#include "daemon/common/log.h"

namespace xferd::metrics {
namespace {

// Scrapes are rare, small and done in milliseconds: two server threads (the
// Exposer's default) serve a few Prometheus servers and curls, and a client
// that sends nothing for this long is dropped.
constexpr char kServerThreads[] = "2";
constexpr char kRequestTimeoutMs[] = "10000";
// mg_check_feature bit: civetweb was built with USE_IPV6.
constexpr unsigned kCivetwebIpv6 = 8;

constexpr char kIndex[] =
    "<html><head><title>xferd</title></head><body>"
    "<p>xferd: Prometheus metrics at <a href=\"/metrics\">/metrics</a></p></body></html>\n";

// civetweb's callbacks carry no state of ours: each running endpoint's
// security, by the port it listens on (a request names it), entered once
// the port is known and removed before the server stops.
Mutex endpoints_mu;
absl::flat_hash_map<int, const ScrapeSecurity*>& Endpoints()
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(endpoints_mu) {
  static auto* endpoints = new absl::flat_hash_map<int, const ScrapeSecurity*>();
  return *endpoints;
}
constexpr char kRealm[] = "realm=\"xferd metrics\"";

// Set on the thread constructing the Exposer: civetweb reports why it could
// not start through the log callback, on that thread, before it throws. The
// first message is the reason ("cannot bind to ...: Address already in use").
thread_local std::string* start_error = nullptr;

int LogMessage(const mg_connection*, const char* message) {
  if (start_error != nullptr) {
    if (start_error->empty()) *start_error = message;
  } else {
    spdlog::warn("metrics endpoint: {}", message);
  }
  return 1;  // logged: civetweb writes nothing itself
}

// Sends a whole response; `body` only for non-HEAD requests, and its length
// unless `body` is unknown (HEAD /metrics, whose body renders on GET only).
int Reply(mg_connection* conn, int status, const char* content_type, absl::string_view body,
          bool head, bool length_known = true, const ScrapeSecurity* challenge = nullptr) {
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", content_type, -1);
  if (length_known) {
    mg_response_header_add(conn, "Content-Length", absl::StrCat(body.size()).c_str(), -1);
  }
  if (status == 405) mg_response_header_add(conn, "Allow", "GET, HEAD", -1);
  if (challenge != nullptr && !challenge->basic_password.empty()) {
    mg_response_header_add(conn, "WWW-Authenticate", absl::StrCat("Basic ", kRealm).c_str(), -1);
  }
  if (challenge != nullptr && !challenge->bearer_token.empty()) {
    mg_response_header_add(conn, "WWW-Authenticate", absl::StrCat("Bearer ", kRealm).c_str(), -1);
  }
  mg_response_header_send(conn);
  if (!head) mg_write(conn, body.data(), body.size());
  return status;
}

// Equal in time independent of where they differ (and of their lengths:
// the digests are compared).
bool SecureEquals(absl::string_view a, absl::string_view b) {
  unsigned char da[SHA256_DIGEST_LENGTH], db[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(a.data()), a.size(), da);
  SHA256(reinterpret_cast<const unsigned char*>(b.data()), b.size(), db);
  return CRYPTO_memcmp(da, db, sizeof(da)) == 0;
}

// Whether the request carries credentials `security` accepts: HTTP basic
// auth ("Authorization: Basic base64(user:password)") or a bearer token.
bool Authorized(const mg_connection* conn, const ScrapeSecurity& security) {
  if (!security.auth_required()) return true;
  const char* header = mg_get_header(conn, "Authorization");
  if (header == nullptr) return false;
  absl::string_view value = absl::StripAsciiWhitespace(header);
  const size_t space = value.find(' ');
  if (space == absl::string_view::npos) return false;
  const absl::string_view scheme = value.substr(0, space);
  const absl::string_view credentials = absl::StripLeadingAsciiWhitespace(value.substr(space));
  if (!security.bearer_token.empty() && absl::EqualsIgnoreCase(scheme, "Bearer")) {
    return SecureEquals(credentials, security.bearer_token);
  }
  std::string decoded;
  if (!security.basic_password.empty() && absl::EqualsIgnoreCase(scheme, "Basic") &&
      absl::Base64Unescape(credentials, &decoded)) {
    return SecureEquals(decoded, absl::StrCat(security.basic_user, ":", security.basic_password));
  }
  return false;
}

// Every request, before civetweb routes it: refuses what lacks credentials
// (when required), answers all but GET /metrics, which goes on to
// prometheus-cpp's handler (return 0).
int BeginRequest(mg_connection* conn) {
  const mg_request_info* request = mg_get_request_info(conn);
  {
    MutexLock lock(&endpoints_mu);
    auto it = Endpoints().find(request->server_port);
    // Not yet entered (its first microseconds) or being stopped: fail closed.
    if (it == Endpoints().end()) {
      return Reply(conn, 503, "text/plain", "starting or stopping\n", false);
    }
    if (!Authorized(conn, *it->second)) {
      return Reply(conn, 401, "text/plain",
                   "unauthorized: this endpoint needs basic auth or a bearer token\n", false, true,
                   it->second);
    }
  }
  const absl::string_view method = request->request_method;
  const absl::string_view path = request->local_uri != nullptr ? request->local_uri : "";
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    return Reply(conn, 405, "text/plain", "only GET and HEAD\n", false);
  }
  if (path == "/metrics") {
    return head ? Reply(conn, 200, kExpositionContentType, "", true, false) : 0;
  }
  if (path == "/") return Reply(conn, 200, "text/html; charset=utf-8", kIndex, head);
  return Reply(conn, 404, "text/plain", "not found: the metrics are at /metrics\n", head);
}

// civetweb's listening_ports entry for `where`.
absl::StatusOr<std::string> PortSpec(const HostPort& where) {
  if (where.host.empty()) return absl::StrCat(where.port);  // every IPv4 address
  if (absl::StrContains(where.host, ':') && mg_check_feature(kCivetwebIpv6) == 0) {
    return absl::InvalidArgumentError(
        "metrics.listen: IPv6 addresses are not supported (Debian's civetweb, the endpoint's "
        "HTTP server, is built without IPv6); use an IPv4 address or a host name");
  }
  return FormatHostPort(where);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listen, std::weak_ptr<prometheus::Collectable> collectable,
    ScrapeSecurity security) {
  absl::StatusOr<HostPort> where = ParseHostPort(listen);
  if (!where.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("metrics.listen: ", where.status().message()));
  }
  absl::StatusOr<std::string> spec = PortSpec(*where);
  if (!spec.ok()) return spec.status();
  const std::vector<std::string> options{"listening_ports", *spec, "num_threads", kServerThreads,
                                   "request_timeout_ms", kRequestTimeoutMs};
  auto owned = std::make_unique<ScrapeSecurity>(std::move(security));

  CivetCallbacks callbacks;  // copied by the server
  callbacks.begin_request = &BeginRequest;
  callbacks.log_message = &LogMessage;
  std::string error;
  start_error = &error;
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(options, &callbacks);
  } catch (const std::exception& e) {
    start_error = nullptr;
    return absl::UnavailableError(absl::StrCat("metrics.listen: cannot listen on ", listen, ": ",
                                               error.empty() ? e.what() : error));
  }
  start_error = nullptr;
  exposer->RegisterCollectable(collectable);

  const std::vector<int> ports = exposer->GetListeningPorts();
  XFERD_CHECK(ports.size() == 1);
  const auto port = static_cast<uint16_t>(ports[0]);
  {
    MutexLock lock(&endpoints_mu);
    Endpoints()[port] = owned.get();
  }
  return std::unique_ptr<MetricsEndpoint>(new MetricsEndpoint(
      std::move(exposer), std::move(owned), FormatHostPort({where->host, port}), port));
}

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<prometheus::Exposer> exposer,
                                 std::unique_ptr<ScrapeSecurity> security, std::string address,
                                 uint16_t port)
    : exposer_(std::move(exposer)),
      security_(std::move(security)),
      address_(std::move(address)),
      port_(port) {}

MetricsEndpoint::~MetricsEndpoint() {
  {
    MutexLock lock(&endpoints_mu);
    Endpoints().erase(port_);
  }
  exposer_.reset();
}

}  // namespace xferd::metrics
