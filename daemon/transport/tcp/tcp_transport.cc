#include "daemon/transport/tcp/tcp_transport.h"

#include <sys/random.h>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/transport/tcp/tcp_frame.h"
#include "daemon/transport/tcp/tcp_ktls.h"

namespace xferd::transport::tcp {
namespace {

// TCP needs no memory registration; regions still get one so every transport
// looks alike to the registry.
class TcpRegistration final : public memory::TransportRegistration {};

absl::StatusOr<std::string> RandomToken() {
  std::string token(kTokenBytes, '\0');
  if (getrandom(token.data(), token.size(), 0) != static_cast<ssize_t>(token.size())) {
    return absl::InternalError("getrandom failed");
  }
  return token;
}

bool IsWildcard(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "*";
}

// For the start-up log: what the lanes will be.
const char* LanesDescription(const LaneTls* tls, KernelTls kernel) {
  if (tls == nullptr) return "unencrypted";
  if (tls->kernel_receive()) return "TLS 1.3 on every lane, in the kernel both ways where it takes it";
  switch (kernel) {
    case KernelTls::kOff:
      return "TLS 1.3 on every lane, in user space (transport.tcp_kernel_tls = \"off\")";
    case KernelTls::kSend:
      return "TLS 1.3 on every lane, kernel send offload where offered (tcp_kernel_tls = \"send\")";
    case KernelTls::kAuto:
      break;
  }
  return "TLS 1.3 on every lane, in user space (the kernel has no \"tls\" module)";
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpTransport>> TcpTransport::Create(
    TcpTransportOptions options, const memory::RegionRegistry& regions) {
  ASSIGN_OR_RETURN(HostPort listen, ParseHostPort(options.data_listen));
  auto transport = std::unique_ptr<TcpTransport>(new TcpTransport(std::move(options), regions));
  const TcpTransportOptions& o = transport->options_;
  if (o.tls.has_value()) {
    // Probing may load the module; only "auto" wants to know.
    const bool kernel_has_tls =
        o.kernel_tls == KernelTls::kAuto && (o.assume_kernel_tls || KernelTlsAvailable());
    ASSIGN_OR_RETURN(transport->tls_, LaneTls::Create(*o.tls, o.kernel_tls, kernel_has_tls));
  }
  for (uint32_t i = 0; i < transport->options_.pollers; ++i) {
    ASSIGN_OR_RETURN(auto worker, TcpWorker::Create());
    transport->workers_.push_back(std::move(worker));
  }
  ASSIGN_OR_RETURN(
      transport->acceptor_,
      TcpAcceptor::Create(listen, transport->options_.connect_timeout, transport->tls_.get()));
  transport->advertise_host_ = !transport->options_.advertise_host.empty()
                                   ? transport->options_.advertise_host
                               : IsWildcard(listen.host) ? ""
                                                         : listen.host;
  spdlog::info("tcp transport: {} pollers, data lanes on {}:{}, {}", transport->options_.pollers,
               listen.host, transport->acceptor_->port(),
               LanesDescription(transport->tls_.get(), o.kernel_tls));
  return transport;
}

TcpTransport::TcpTransport(TcpTransportOptions options, const memory::RegionRegistry& regions)
    : options_(std::move(options)), regions_(regions) {}

TcpTransport::~TcpTransport() { Shutdown(); }

std::shared_ptr<TcpLink> TcpTransport::NewLink(const PeerIdentity& peer, uint32_t lanes) {
  std::vector<TcpWorker*> workers;
  for (uint32_t i = 0; i < lanes; ++i) workers.push_back(workers_[i].get());
  auto link =
      std::make_shared<TcpLink>(peer, std::move(workers), regions_, lanes, options_.lane_depth,
                                options_.socket, tls_.get(), options_.sums_frames);
  links_.Add(link);
  return link;
}

absl::Status CheckEndpoints(const LinkEndpoints& e) {
  if (e.kind != TransportKind::kTcp) return absl::OkStatus();
  if (e.tcp.host.size() > 255 || e.tcp.session_token.size() > 64) {
    return absl::InvalidArgumentError("malformed TCP endpoint in handshake");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Link>> TcpTransport::CreateLink(LinkEndpoints* local) {
  local->kind = TransportKind::kTcp;
  local->lanes = options_.pollers;
  local->tcp.sums_frames = options_.sums_frames;
  // The lane count is settled by the responder's answer; see Connect.
  return std::shared_ptr<Link>(NewLink(PeerIdentity{}, options_.pollers));
}

absl::StatusOr<std::shared_ptr<Link>> TcpTransport::AcceptLink(const PeerIdentity& peer,
                                                               const LinkEndpoints& remote,
                                                               LinkEndpoints* local) {
  ASSIGN_OR_RETURN(const uint32_t lanes,
                   AcceptedLanes(TransportKind::kTcp, options_.pollers, peer, remote));
  ASSIGN_OR_RETURN(std::string token, RandomToken());
  std::shared_ptr<TcpLink> link = NewLink(peer, lanes);
  link->AgreeFraming(remote.tcp);
  acceptor_->Expect(token, link, lanes, absl::Now() + options_.connect_timeout);
  local->kind = TransportKind::kTcp;
  local->lanes = lanes;
  local->tcp =
      TcpEndpoint{advertise_host_, acceptor_->port(), std::move(token), options_.sums_frames};
  return std::shared_ptr<Link>(std::move(link));
}

absl::StatusOr<RemoteRegion> TcpTransport::GrantRegion(Link&, const memory::Region& region,
                                                        absl::Time) {
  return RemoteRegion{region.id(), region.size(), 0, 0, {}};
}

TransportStats TcpTransport::stats() const {
  TransportStats stats;
  for (const auto& worker : workers_) stats.lanes += worker->attached_lanes();
  return stats;
}

absl::StatusOr<std::unique_ptr<memory::TransportRegistration>> TcpTransport::RegisterMemory(
    const memory::Region&) {
  return std::make_unique<TcpRegistration>();
}

void TcpTransport::Shutdown() {
  if (acceptor_ != nullptr) acceptor_->Stop();
  links_.CloseAll(absl::UnavailableError("daemon is shutting down"));
}

}  // namespace xferd::transport::tcp
