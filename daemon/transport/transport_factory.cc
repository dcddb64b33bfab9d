#include "daemon/transport/transport_factory.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"
#include "daemon/transport/tcp/tcp_transport.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/verbs_transport.h"

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
  options.socket.user_timeout = config.transport.tcp_user_timeout;
  if (TcpEncrypted(config)) {
    // The files were checked by the service's TLS set-up (main runs it first).
    tcp::LaneTlsFiles files;
    ASSIGN_OR_RETURN(files.cert_pem, ReadKeyFile("tls.cert", config.tls.cert));
    ASSIGN_OR_RETURN(files.key_pem, ReadKeyFile("tls.key", config.tls.key));
    ASSIGN_OR_RETURN(files.ca_pem, ReadKeyFile("tls.ca", config.tls.ca));
    options.tls = std::move(files);
  }
  // Validated: "auto", "send" or "off".
  const std::string& kernel = config.transport.tcp_kernel_tls;
  options.kernel_tls = kernel == "off"    ? tcp::KernelTls::kOff
                       : kernel == "send" ? tcp::KernelTls::kSend
                                          : tcp::KernelTls::kAuto;
  ASSIGN_OR_RETURN(auto transport, tcp::TcpTransport::Create(options, regions));
  return std::unique_ptr<Transport>(std::move(transport));
}

absl::StatusOr<std::unique_ptr<Transport>> CreateVerbs(const Config& config,
                                                       const memory::RegionRegistry& regions,
                                                       std::string* description) {
  const TransportConfig& t = config.transport;
  ASSIGN_OR_RETURN(std::vector<DeviceInfo> devices, verbs::QueryDevices());
  verbs::DeviceRequest request{t.verbs_device, t.verbs_port, t.verbs_gid_index, t.verbs_mtu};
  std::vector<verbs::PortSelection> ports;
  if (t.verbs_devices.empty()) {
    ASSIGN_OR_RETURN(verbs::PortSelection port, verbs::SelectPort(devices, request));
    ports.push_back(std::move(port));
  } else {
    ASSIGN_OR_RETURN(ports, verbs::SelectPorts(devices, t.verbs_devices, request));
  }
  verbs::VerbsTransportOptions options;
  ASSIGN_OR_RETURN(options.pairing.pairing, verbs::ParsePairing(t.verbs_pairing));
  options.pairing.prefix_bits = t.verbs_rail_prefix_bits;
  options.numa_pinning = t.numa_pinning == "auto";
  options.pollers = config.engine.pollers;
  options.lane_depth = config.engine.lane_depth;
  options.qp_timeout = static_cast<uint8_t>(t.verbs_qp_timeout);
  options.retry_count = static_cast<uint8_t>(t.verbs_retry_count);
  options.mr_chunk = t.verbs_mr_chunk;
  options.memory_windows = t.verbs_memory_windows;
  ASSIGN_OR_RETURN(auto transport, verbs::VerbsTransport::Create(options, ports, regions));
  std::vector<std::string> descriptions;
  for (const verbs::PortSelection& port : ports) descriptions.push_back(port.description);
  *description = absl::StrJoin(descriptions, "; ");
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace

absl::StatusOr<TransportChoiceResult> CreateTransport(const Config& config,
                                                      const memory::RegionRegistry& regions) {
  const TransportConfig& t = config.transport;
  // NodeInfo.transport_reason says whether TCP data lanes are encrypted.
  const char* lanes = TcpEncrypted(config)
                          ? "; data lanes: TLS 1.3 (transport.tcp_encryption)"
                          : "; data lanes: unencrypted (transport.tcp_encryption = \"off\")";
  if (t.kind == TransportChoice::kTcp) {
    ASSIGN_OR_RETURN(auto transport, CreateTcp(config, regions));
    return TransportChoiceResult{std::move(transport),
                                 absl::StrCat("configured: transport.kind = \"tcp\"", lanes)};
  }
  std::string description;
  absl::StatusOr<std::unique_ptr<Transport>> verbs = CreateVerbs(config, regions, &description);
  if (verbs.ok()) {
    return TransportChoiceResult{
        *std::move(verbs),
        absl::StrCat(t.kind == TransportChoice::kAuto ? "auto" : "configured", ": ", description)};
  }
  if (t.kind == TransportChoice::kVerbs || t.require_rdma) {
    return absl::FailedPreconditionError(
        absl::StrCat("RDMA is required (transport.kind = \"", TransportChoiceName(t.kind),
                     "\", require_rdma = ", t.require_rdma ? "true" : "false",
                     ") but the verbs transport cannot start: ", verbs.status().message()));
  }
  ASSIGN_OR_RETURN(auto transport, CreateTcp(config, regions));
  return TransportChoiceResult{
      std::move(transport), absl::StrCat("auto: no usable RDMA device (", verbs.status().message(),
                                         "); using tcp", lanes)};
}

absl::StatusOr<std::vector<DeviceInfo>> QueryHostDevices() { return verbs::QueryDevices(); }

}  // namespace xferd::transport
