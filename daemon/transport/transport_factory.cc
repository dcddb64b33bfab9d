#include "daemon/transport/transport_factory.h"

#include "absl/strings/str_cat.h"
#include "daemon/common/status_macros.h"
#include "daemon/transport/tcp/tcp_transport.h"

namespace xferd::transport {
namespace {

absl::StatusOr<std::unique_ptr<Transport>> CreateTcp(const Config& config,
                                                     const memory::RegionRegistry& regions) {
  tcp::TcpTransportOptions options;
  options.pollers = config.engine.pollers;
  options.lane_depth = config.engine.lane_depth;
  options.data_listen = config.transport.tcp_data_listen;
  options.advertise_host = config.transport.tcp_advertise_host;
  options.socket.buffer_bytes = config.transport.tcp_socket_buffer;
  ASSIGN_OR_RETURN(auto transport, tcp::TcpTransport::Create(options, regions));
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace

absl::StatusOr<TransportChoiceResult> CreateTransport(const Config& config,
                                                      const memory::RegionRegistry& regions) {
  const TransportConfig& t = config.transport;
  const bool need_verbs = t.kind == TransportChoice::kVerbs || t.require_rdma;
  if (t.kind != TransportChoice::kTcp) {
    // The verbs transport is not part of this build yet.
    const std::string why = "this build has no verbs transport";
    if (need_verbs) {
      return absl::FailedPreconditionError(
          absl::StrCat("RDMA was required (transport.kind = \"", TransportChoiceName(t.kind),
                       "\", require_rdma = ", t.require_rdma ? "true" : "false", ") but ", why));
    }
    ASSIGN_OR_RETURN(auto transport, CreateTcp(config, regions));
    return TransportChoiceResult{std::move(transport), absl::StrCat("auto: ", why, "; using tcp")};
  }
  ASSIGN_OR_RETURN(auto transport, CreateTcp(config, regions));
  return TransportChoiceResult{std::move(transport), "configured: transport.kind = \"tcp\""};
}

}  // namespace xferd::transport
