// The HTTP endpoint Prometheus scrapes: prometheus-cpp's Exposer (civetweb)
// serving one Collectable at GET /metrics, plus what the library leaves to us:
// start-up errors as absl::Status (the Exposer throws), civetweb's messages in
// our log, HEAD /metrics, 405 for other methods, 404 for other paths and an
// index page at /, and scrape authentication (basic auth, bearer tokens).
// Nothing here touches the data path.
#pragma once

#include <prometheus/collectable.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace xferd::metrics {

// Who may scrape. Empty fields: that method is off; with none set, anyone
// who reaches the address may (bind it to a trusted interface). No HTTPS:
// Debian's civetweb 1.15 looks up SSL_get_peer_certificate, which OpenSSL 3
// no longer exports, and calls the null pointer on the first TLS connection.
struct ScrapeSecurity {
  // HTTP basic auth, and/or a bearer token: a scrape must carry one of them.
  std::string basic_user;
  std::string basic_password;
  std::string bearer_token;
  bool auth_required() const { return !basic_password.empty() || !bearer_token.empty(); }
};

// The Content-Type of /metrics: what prometheus-cpp's handler sends (the
// text format 0.0.4, which Prometheus assumes for text/plain).
inline constexpr char kExpositionContentType[] = "text/plain; charset=utf-8";

class MetricsEndpoint {
 public:
  // Binds `listen` ("127.0.0.1:9300", "0.0.0.0:9300", "localhost:9300"; port
  // 0 picks a free one) and serves `collectable` at /metrics, collected on
  // one of the server's threads per scrape, for as long as it lives. Errors:
  // INVALID_ARGUMENT (bad address, or IPv6, which Debian's civetweb is built
  // without), UNAVAILABLE (cannot bind, e.g. the port is taken; the message
  // carries civetweb's reason). With `security`, requests without valid
  // credentials get 401 and a WWW-Authenticate header.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& listen, std::weak_ptr<prometheus::Collectable> collectable,
      ScrapeSecurity security = {});
  // Stops serving: closes the listener and joins the server's threads (a
  // scrape in progress finishes first). Takes up to 2 s: civetweb's listener
  // thread notices the stop between its 2 s polls. Not on a server thread.
  ~MetricsEndpoint();

  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // "host:port" with the port bound (for port 0: the one chosen).
  const std::string& address() const { return address_; }
  uint16_t port() const { return port_; }

 private:
  MetricsEndpoint(std::unique_ptr<prometheus::Exposer> exposer,
                  std::unique_ptr<ScrapeSecurity> security, std::string address, uint16_t port);

  std::unique_ptr<prometheus::Exposer> exposer_;
  const std::unique_ptr<ScrapeSecurity> security_;  // entered by port for the callbacks
  const std::string address_;
  const uint16_t port_;
};

}  // namespace xferd::metrics
