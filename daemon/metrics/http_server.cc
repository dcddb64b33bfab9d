#include "daemon/metrics/http_server.h"

#include <microhttpd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/common/status_macros.h"
#include "daemon/metrics/exposition.h"
#include "daemon/transport/tcp/tcp_socket.h"

namespace xferd::metrics {
namespace {

// Bounds on what scrapers may hold: a few Prometheus servers and curls, each
// done in milliseconds. Idle connections beyond the timeout are closed.
constexpr unsigned kMaxConnections = 16;
constexpr unsigned kConnectionTimeoutSeconds = 10;
constexpr int kListenBacklog = 16;

constexpr char kIndex[] =
    "<html><head><title>xferd</title></head><body>"
    "<p>xferd: Prometheus metrics at <a href=\"/metrics\">/metrics</a></p></body></html>\n";

MHD_Result Reply(MHD_Connection* connection, unsigned status, const std::string& body,
                 const char* content_type) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) {
    MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  }
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued;
}

void LogFromMhd(void*, const char* format, va_list args) {
  char message[512];
  std::vsnprintf(message, sizeof(message), format, args);
  // Its messages end in a newline of their own.
  message[std::strcspn(message, "\n")] = '\0';
  spdlog::warn("metrics endpoint: {}", message);
}

}  // namespace

struct HttpHandlers {
  // libmicrohttpd calls this first with the headers (*request_state null),
  // then once per chunk of body (none for GET), then to answer.
  static MHD_Result Handle(void* cls, MHD_Connection* connection, const char* url,
                           const char* method, const char*, const char*, size_t* upload_size,
                           void** request_state) {
    static int started;  // any non-null marker
    if (*request_state == nullptr) {
      *request_state = &started;
      return MHD_YES;
    }
    if (*upload_size != 0) {  // a body nobody asked for: discard it
      *upload_size = 0;
      return MHD_YES;
    }
    if (std::strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
        std::strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
      return Reply(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n", "text/plain");
    }
    if (std::strcmp(url, "/metrics") == 0) {
      auto* server = static_cast<MetricsHttpServer*>(cls);
      return Reply(connection, MHD_HTTP_OK, server->render_(), kTextContentType);
    }
    if (std::strcmp(url, "/") == 0) {
      return Reply(connection, MHD_HTTP_OK, kIndex, "text/html; charset=utf-8");
    }
    return Reply(connection, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n",
                 "text/plain");
  }
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen, Render render) {
  absl::StatusOr<transport::tcp::HostPort> where = transport::tcp::ParseHostPort(listen);
  if (!where.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("metrics.listen: ", where.status().message()));
  }
  absl::StatusOr<UniqueFd> socket = transport::tcp::Listen(*where, kListenBacklog);
  if (!socket.ok()) {
    return absl::UnavailableError(
        absl::StrCat("metrics.listen: cannot listen on ", listen, ": ", socket.status().message()));
  }
  ASSIGN_OR_RETURN(const uint16_t port, transport::tcp::LocalPort(socket->get()));
  const std::string host = where->host.find(':') != std::string::npos
                               ? absl::StrCat("[", where->host, "]")
                               : where->host;
  auto server = std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(std::move(render), absl::StrCat(host, ":", port), port));
  // libmicrohttpd owns the socket from here on, and closes it when stopped.
  const int fd = socket->release();
  server->daemon_ = MHD_start_daemon(
      MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, nullptr, nullptr, &HttpHandlers::Handle,
      server.get(), MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, kMaxConnections,
      MHD_OPTION_CONNECTION_TIMEOUT, kConnectionTimeoutSeconds, MHD_OPTION_EXTERNAL_LOGGER,
      &LogFromMhd, nullptr, MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    UniqueFd close_it(fd);
    return absl::InternalError(
        absl::StrCat("metrics.listen: the HTTP server did not start on ", listen));
  }
  return server;
}

MetricsHttpServer::MetricsHttpServer(Render render, std::string address, uint16_t port)
    : render_(std::move(render)), address_(std::move(address)), port_(port) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (daemon_ == nullptr) return;
  MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

}  // namespace xferd::metrics
