// The HTTP endpoint Prometheus scrapes, on libmicrohttpd: GET or HEAD
// /metrics answers with the text exposition a callback renders; / says where
// the metrics are; other paths get 404 and other methods 405. One internal
// thread serves every connection: scrapes are rare and small, and nothing
// here touches the data path.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct MHD_Daemon;

namespace xferd::metrics {

class MetricsHttpServer {
 public:
  // Renders the exposition; called on the server's thread, once per scrape.
  using Render = std::function<std::string()>;

  // Binds `listen` ("127.0.0.1:9300", "[::1]:9300", "0.0.0.0:9300"; port 0
  // picks a free one) and starts serving. Errors: INVALID_ARGUMENT (bad
  // address), UNAVAILABLE (cannot bind, e.g. the port is taken), INTERNAL
  // (libmicrohttpd did not start).
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen,
                                                                  Render render);
  ~MetricsHttpServer();

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // "host:port" with the port bound (for port 0: the one chosen).
  const std::string& address() const { return address_; }
  uint16_t port() const { return port_; }

  // Stops accepting, closes connections and joins the server thread; a
  // scrape in progress finishes first. Idempotent. Any thread but the
  // server's own.
  void Stop();

 private:
  MetricsHttpServer(Render render, std::string address, uint16_t port);

  const Render render_;
  const std::string address_;
  const uint16_t port_;
  MHD_Daemon* daemon_ = nullptr;  // owned; null once stopped

  friend struct HttpHandlers;
};

}  // namespace xferd::metrics
