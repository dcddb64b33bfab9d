#include "tests/transport/transport_factories.h"

#include "daemon/transport/tcp/tcp_transport.h"

namespace xferd::transport {

std::vector<TransportFactory> AllTransportFactories() {
  std::vector<TransportFactory> factories;
  factories.push_back(
      TransportFactory{"tcp",
                       [](const memory::RegionRegistry& regions,
                          uint32_t pollers) -> absl::StatusOr<std::unique_ptr<Transport>> {
                         tcp::TcpTransportOptions options;
                         options.pollers = pollers;
                         options.lane_depth = 16;
                         auto transport = tcp::TcpTransport::Create(options, regions);
                         if (!transport.ok()) return transport.status();
                         return std::unique_ptr<Transport>(*std::move(transport));
                       },
                       /*refuses_per_write=*/true, /*enforces_acl_per_write=*/true});
  return factories;
}

}  // namespace xferd::transport
