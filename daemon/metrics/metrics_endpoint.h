// The HTTP(S) endpoint Prometheus scrapes: GNU libmicrohttpd serving one
// Collectable at GET /metrics in prometheus-cpp's text format (gzipped when
// the scraper asks), with the endpoint's own exposer_* families; HEAD
// /metrics, 405 for other methods, 404 for other paths and an index page at
// /; scrape security: HTTPS (GnuTLS, optionally requiring client
// certificates of a CA), HTTP basic auth and bearer tokens; start-up errors as
// absl::Status and the server's messages in our log. Nothing here touches the
// data path.
#pragma once

#include <prometheus/collectable.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/metrics/scrape_security.h"

namespace xferd::metrics {

// The Content-Type of /metrics: the text format 0.0.4, which Prometheus
// assumes for text/plain (what prometheus-cpp's own handler sends).
inline constexpr char kExpositionContentType[] = "text/plain; charset=utf-8";

class MetricsEndpoint {
 public:
  // Binds `listen` ("127.0.0.1:9300", "0.0.0.0:9300", "[::1]:9300",
  // "localhost:9300"; port 0 picks a free one) and serves `collectable` at
  // /metrics, collected on one of the server's threads per scrape, for as
  // long as it lives. Errors: INVALID_ARGUMENT (bad address or TLS
  // material), UNAVAILABLE (cannot resolve or bind, e.g. the port is taken;
  // the message carries the reason). With `security`, requests without valid
  // credentials get 401 and a WWW-Authenticate header per accepted scheme.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& listen, std::weak_ptr<prometheus::Collectable> collectable,
      ScrapeSecurity security = {});
  // Stops serving: closes the listener and joins the server's threads (a
  // scrape in progress finishes first). Not on a server thread.
  ~MetricsEndpoint();

  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // "host:port" with the port bound (for port 0: the one chosen).
  const std::string& address() const { return address_; }
  uint16_t port() const { return port_; }
  // "https" or "http".
  const char* scheme() const;

 private:
  struct Server;  // the server and what its callbacks use (metrics_endpoint.cc)

  MetricsEndpoint(std::unique_ptr<Server> server, std::string address, uint16_t port);

  const std::unique_ptr<Server> server_;
  const std::string address_;
  const uint16_t port_;
};

}  // namespace xferd::metrics
