// xferd: the transfer daemon. Loads configuration (TOML file, then flags),
// builds memory registry, transport, engine and gRPC server, reports ready to
// systemd, and on SIGTERM/SIGINT drains: no new transfers, in-flight ones get
// engine.drain_timeout to finish, peers are told, then everything stops.
#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <signal.h>
#include <sys/random.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"
#include "daemon/cluster/directory.h"
#include "daemon/common/config.h"
#include "daemon/common/host_port.h"
#include "daemon/common/log.h"
#include "daemon/common/logging.h"
#include "daemon/engine/engine.h"
#include "daemon/memory/region_registry.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/metrics_endpoint.h"
#include "daemon/service/local_socket.h"
#include "daemon/service/peer_client.h"
#include "daemon/service/peer_service.h"
#include "daemon/service/security.h"
#include "daemon/service/server.h"
#include "daemon/service/xferd_service.h"
#include "daemon/transport/transport_factory.h"

namespace xferd {
namespace {

constexpr char kVersion[] = XFERD_VERSION;  // from //:version.bzl, by daemon/BUILD
constexpr char kDefaultConfigPath[] = "/etc/xferd/xferd.toml";
// After the drain, how long calls and client connections may linger.
constexpr absl::Duration kServerShutdownGrace = absl::Milliseconds(500);

struct Flags {
  std::string config_path;
  std::string ready_file;
  bool check_config = false;
  // Overrides; empty/unset keeps the config file's value.
  std::string node_id, listen, unix_socket, transport, data_listen, slice_size, log_level;
  uint32_t pollers = 0;
  bool require_rdma = false, log_json = false;
  // [tls] overrides.
  std::string tls_cert, tls_key, tls_ca, tls_client_ca;
  std::string metrics_listen;
};

// Parses argv. Returns an exit code when the program should stop right away.
std::optional<int> ParseFlags(int argc, char** argv, Flags& f) {
  CLI::App app{"xferd: RDMA/TCP data-transfer daemon, managed over gRPC"};
  app.set_version_flag("--version", kVersion);
  app.add_option("-c,--config", f.config_path,
                 absl::StrCat("TOML config file (default ", kDefaultConfigPath, " if present)"));
  app.add_flag("--check-config", f.check_config, "validate the configuration and exit");
  app.add_option("--ready-file", f.ready_file,
                 "write a JSON line {node_id, grpc_address, port, pid} here once serving");
  app.add_option("--node-id", f.node_id, "node id peers use (default host:port)");
  app.add_option("--listen", f.listen, "gRPC address, e.g. 0.0.0.0:7300 (\"\" disables)");
  app.add_option("--unix-socket", f.unix_socket, "unix socket path for local clients");
  app.add_option("--transport", f.transport, "auto, tcp or verbs");
  app.add_flag("--require-rdma", f.require_rdma, "fail instead of falling back to tcp");
  app.add_option("--data-listen", f.data_listen, "TCP transport data address");
  app.add_option("--pollers", f.pollers, "poller threads");
  app.add_option("--slice-size", f.slice_size, "default slice size, e.g. 1MiB");
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error");
  app.add_flag("--log-json", f.log_json, "log one JSON object per line");
  app.add_option("--tls-cert", f.tls_cert, "mTLS: this daemon's certificate (PEM; tls.cert)");
  app.add_option("--tls-key", f.tls_key, "mTLS: its private key (PEM; tls.key)");
  app.add_option("--tls-ca", f.tls_ca, "mTLS: CA of daemon certificates (PEM; tls.ca)");
  app.add_option("--tls-client-ca", f.tls_client_ca,
                 "mTLS: CA of remote clients' certificates (PEM; tls.client_ca)");
  app.add_option("--metrics-listen", f.metrics_listen,
                 "Prometheus /metrics address, e.g. 127.0.0.1:9300 (\"\" disables)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return std::nullopt;
}

absl::StatusOr<Config> LoadConfig(const Flags& f) {
  Config config;
  if (!f.config_path.empty()) {
    ASSIGN_OR_RETURN(config, LoadConfigFile(f.config_path));
  } else if (::access(kDefaultConfigPath, F_OK) == 0) {
    ASSIGN_OR_RETURN(config, LoadConfigFile(kDefaultConfigPath));
  }
  if (!f.node_id.empty()) config.node_id = f.node_id;
  if (!f.listen.empty()) config.server.listen = f.listen == "\"\"" ? "" : f.listen;
  if (!f.unix_socket.empty())
    config.server.unix_socket = f.unix_socket == "\"\"" ? "" : f.unix_socket;
  if (!f.transport.empty()) {
    ASSIGN_OR_RETURN(config.transport.kind, ParseTransportChoice(f.transport));
  }
  if (f.require_rdma) config.transport.require_rdma = true;
  if (!f.data_listen.empty()) config.transport.tcp_data_listen = f.data_listen;
  if (f.pollers != 0) config.engine.pollers = f.pollers;
  if (!f.slice_size.empty()) {
    ASSIGN_OR_RETURN(config.engine.slice_size, ParseSize(f.slice_size));
  }
  if (!f.log_level.empty()) config.log.level = f.log_level;
  if (f.log_json) config.log.json = true;
  if (!f.tls_cert.empty()) config.tls.cert = f.tls_cert;
  if (!f.tls_key.empty()) config.tls.key = f.tls_key;
  if (!f.tls_ca.empty()) config.tls.ca = f.tls_ca;
  if (!f.tls_client_ca.empty()) config.tls.client_ca = f.tls_client_ca;
  if (!f.metrics_listen.empty())
    config.metrics.listen = f.metrics_listen == "\"\"" ? "" : f.metrics_listen;
  RETURN_IF_ERROR(Validate(config));
  return config;
}

std::string Hostname() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

uint64_t RandomIncarnation() {
  uint64_t value = 0;
  while (getrandom(&value, sizeof(value), 0) != sizeof(value)) {
  }
  return value;
}

// The address peers use to call back: configured, or the bound listen address
// with a wildcard host replaced by the host name.
std::string AdvertisedAddress(const Config& config, int port) {
  if (!config.server.advertise.empty()) return config.server.advertise;
  absl::StatusOr<HostPort> listen = ParseHostPort(config.server.listen);
  std::string host = listen.ok() ? listen->host : "";
  if (host.empty() || host == "0.0.0.0" || host == "::") host = Hostname();
  return FormatHostPort({host, static_cast<uint16_t>(port)});
}

void WriteReadyFile(const std::string& path, const engine::NodeIdentity& self, int port,
                    const std::string& metrics_address) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "{\"node_id\": \"" << self.node_id << "\", \"grpc_address\": \"" << self.address
        << "\", \"port\": " << port << ", \"pid\": " << ::getpid();
    if (!metrics_address.empty()) out << ", \"metrics_address\": \"" << metrics_address << "\"";
    out << "}\n";
  }
  std::rename(tmp.c_str(), path.c_str());
}

// The Prometheus endpoint when metrics.listen is set, else null.
absl::StatusOr<std::unique_ptr<metrics::MetricsEndpoint>> StartMetricsEndpoint(
    const Config& config, const std::shared_ptr<metrics::DaemonMetrics>& daemon_metrics) {
  if (config.metrics.listen.empty()) return nullptr;
  ASSIGN_OR_RETURN(metrics::ScrapeSecurity security, metrics::LoadScrapeSecurity(config.metrics));
  const bool auth = security.auth_required();
  const bool client_certs = !security.client_ca_pem.empty();
  ASSIGN_OR_RETURN(
      std::unique_ptr<metrics::MetricsEndpoint> endpoint,
      metrics::MetricsEndpoint::Start(config.metrics.listen, daemon_metrics, std::move(security)));
  spdlog::info("metrics at {}://{}/metrics ({}{})", endpoint->scheme(), endpoint->address(),
               auth ? "scrapes must authenticate" : "no scrape authentication",
               client_certs ? ", with a client certificate" : "");
  return endpoint;
}

// Waits for SIGTERM/SIGINT (blocked in every thread), pinging the systemd
// watchdog meanwhile when one is configured. Returns the signal.
int WaitForStopSignal(const sigset_t& signals) {
  uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
  const absl::Duration ping = watchdog ? absl::Microseconds(watchdog_usec) / 2 : absl::Hours(1);
  for (;;) {
    const timespec timeout = absl::ToTimespec(ping);
    const int sig = sigtimedwait(&signals, nullptr, &timeout);
    if (sig > 0) return sig;
    if (watchdog) sd_notify(0, "WATCHDOG=1");
  }
}

// Blocks SIGTERM and SIGINT before any thread starts, so that every thread
// inherits the mask and only WaitForStopSignal receives them.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

// What a running daemon owns, in dependency order: built top to bottom,
// destroyed bottom to top, so teardown needs no code.
struct Daemon {
  absl::Time started_at;
  std::unique_ptr<memory::RegionRegistry> regions;
  transport::TransportChoiceResult transport;  // and why it was chosen
  service::Security security;
  std::unique_ptr<service::GrpcPeerRpc> peer_rpc;
  std::unique_ptr<engine::Engine> engine;
  // Records transfers from the start; destroyed before the engine, after its
  // Stop() and after the endpoint (which only holds a weak_ptr to it).
  std::shared_ptr<metrics::DaemonMetrics> metrics;
  std::unique_ptr<metrics::MetricsEndpoint> metrics_endpoint;
  std::unique_ptr<service::XferdServiceImpl> xferd_service;
  std::unique_ptr<service::PeerServiceImpl> peer_service;
  std::unique_ptr<service::Server> server;
  // Local clients' request rings: closed before the engine stops, so no
  // poller serves a ring while the engine goes.
  std::unique_ptr<service::LocalSocket> local;
  // With [cluster]: this daemon's membership. Declared last, so it goes
  // first: its lookup thread finishes before the service it answers for.
  std::unique_ptr<cluster::Directory> directory;
};

// The region registry, the transport, security and the engine.
absl::Status StartEngine(const Config& config, Daemon& d) {
  memory::RegistryOptions registry_options;
  registry_options.file_confinement.dirs = config.regions.file_dirs;
  registry_options.file_confinement.create_mode = config.regions.file_mode;
  registry_options.max_registered_bytes = config.regions.max_registered_bytes;
  for (const TenantConfig& tenant : config.engine.tenants) {
    if (tenant.max_registered_bytes != 0) {
      registry_options.owner_caps[tenant.name] = tenant.max_registered_bytes;
    }
  }
  const uint64_t incarnation = RandomIncarnation();
  d.regions = std::make_unique<memory::RegionRegistry>(registry_options);
  // Security first: its checks of the [tls] files name the key at fault,
  // and the TCP transport's encrypted lanes use the same files.
  ASSIGN_OR_RETURN(d.security, service::SetUpSecurity(config));
  ASSIGN_OR_RETURN(d.transport, transport::CreateTransport(config, *d.regions));
  spdlog::info("transport {} ({})", transport::TransportKindName(d.transport.transport->kind()),
               d.transport.reason);
  d.peer_rpc =
      std::make_unique<service::GrpcPeerRpc>(d.security.peer_credentials, d.security.peer_auth);
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine =
      engine::Engine::Create(config.engine, engine::NodeIdentity{config.node_id, incarnation, ""},
                             *d.transport.transport, *d.regions, *d.peer_rpc);
  if (!engine.ok()) {
    return absl::Status(engine.status().code(),
                        absl::StrCat("the engine: ", engine.status().message()));
  }
  d.engine = *std::move(engine);
  d.engine->SetDeviceQuery(transport::QueryHostDevices);
  return absl::OkStatus();
}

// Metrics, the gRPC services and the server that carries them.
absl::Status StartServing(const Config& config, Daemon& d) {
  d.metrics = std::make_shared<metrics::DaemonMetrics>(*d.engine, kVersion, d.started_at,
                                                       config.regions.max_registered_bytes);
  ASSIGN_OR_RETURN(d.metrics_endpoint, StartMetricsEndpoint(config, d.metrics));
  // Served whenever there is a unix socket: SHM regions are mapped through
  // it; server.local_rings decides only whether it opens request rings.
  const bool local = !config.server.unix_socket.empty();
  const std::string local_socket =
      local ? service::LocalSocketPath(config.server.unix_socket) : std::string();
  d.xferd_service = std::make_unique<service::XferdServiceImpl>(
      *d.engine,
      service::NodeDescription{kVersion, d.transport.reason, config.server.unix_socket,
                               local_socket, d.started_at, d.security.description});
  d.peer_service = std::make_unique<service::PeerServiceImpl>(*d.engine, d.security.peer_auth);
  service::ServerOptions server_options{config.server.listen, config.server.unix_socket,
                                        config.server.unix_socket_mode, d.security.tcp_credentials};
  ASSIGN_OR_RETURN(d.server, service::Server::Start(server_options,
                                                    {d.xferd_service.get(), d.peer_service.get()}));
  if (local) {
    ASSIGN_OR_RETURN(d.local, service::LocalSocket::Start(
                                  {local_socket, config.server.unix_socket_mode,
                                   config.server.local_max_sessions, config.server.local_rings},
                                  *d.engine));
  }
  return absl::OkStatus();
}

// With [cluster]: joins the directory under this daemon's node id, before
// it says it is ready, so that a duplicate node id stops it at start-up.
absl::Status JoinCluster(const Config& config, Daemon& d) {
  if (!config.cluster.enabled()) return absl::OkStatus();
  const engine::NodeIdentity& me = d.engine->self();
  v1::DirectoryNode self;
  self.set_node_id(me.node_id);
  self.set_address(me.address);
  self.set_transport(d.transport.transport->kind() == transport::TransportKind::kVerbs
                         ? v1::TRANSPORT_KIND_VERBS
                         : v1::TRANSPORT_KIND_TCP);
  self.set_device(d.engine->transport_device());
  self.set_version(kVersion);
  for (const std::string& name : d.security.names) self.add_identity(name);
  self.set_incarnation(me.incarnation);
  absl::StatusOr<std::unique_ptr<cluster::Directory>> directory =
      cluster::Directory::Join(config.cluster, std::move(self), *d.engine);
  if (!directory.ok()) {
    return absl::Status(directory.status().code(),
                        absl::StrCat("the cluster directory: ", directory.status().message()));
  }
  d.directory = *std::move(directory);
  d.xferd_service->SetDirectory(d.directory.get());
  // Each scrape asks it; Drain clears it before the directory leaves.
  d.metrics->SetDirectoryProbe(
      [directory = d.directory.get()] { return directory->state().connected; });
  return absl::OkStatus();
}

// Names the node now that its port is known, joins the cluster directory
// (if configured), then says it serves: in the log, the ready file and to
// systemd. Errors: those of joining the directory.
absl::Status AnnounceReady(const Config& config, const std::string& ready_file, Daemon& d) {
  const int port = d.server->port();
  const std::string address = AdvertisedAddress(config, port);
  d.engine->SetIdentity(
      d.security.node_id.empty() ? absl::StrCat(Hostname(), ":", port) : d.security.node_id,
      address);
  const engine::NodeIdentity& me = d.engine->self();
  const std::string transport(transport::TransportKindName(d.transport.transport->kind()));
  absl::Status joined = JoinCluster(config, d);
  if (!joined.ok()) return joined;
  spdlog::info("xferd {} ready node={} grpc={} unix={} transport={} pollers={}", kVersion,
               me.node_id, address, config.server.unix_socket, transport, config.engine.pollers);
  WriteReadyFile(ready_file, me, port,
                 d.metrics_endpoint != nullptr ? d.metrics_endpoint->address() : "");
  sd_notifyf(0, "READY=1\nSTATUS=serving node %s on %s (%s)", me.node_id.c_str(), address.c_str(),
             transport.c_str());
  return absl::OkStatus();
}

// After SIGTERM/SIGINT: no new transfers, in-flight ones get
// engine.drain_timeout to finish, peers are told, then everything stops.
void Drain(const Config& config, int sig, Daemon& d) {
  spdlog::info("{}: draining (up to {})", strsignal(sig),
               absl::FormatDuration(config.engine.drain_timeout));
  sd_notify(0, "STOPPING=1\nSTATUS=draining");
  d.server->SetServing(false);
  d.engine->BeginDrain();
  if (!d.engine->WaitIdle(absl::Now() + config.engine.drain_timeout)) {
    const uint32_t failed = d.engine->FailAll(absl::UnavailableError(
        absl::StrCat("daemon shut down before the transfer finished (engine.drain_timeout = ",
                     absl::FormatDuration(config.engine.drain_timeout), ")")));
    spdlog::warn("drain timeout: failed {} transfers still in flight", failed);
  }
  // No more scrapes: the endpoint's threads wake and stop at once (one
  // finishing a scrape first).
  d.metrics_endpoint.reset();
  d.metrics->SetDirectoryProbe(nullptr);
  // Gone from the directory before the goodbyes: no daemon looks this one
  // up again once its peers have let it go.
  if (d.directory != nullptr) d.directory->Leave(absl::Now() + absl::Seconds(2));
  d.engine->SayGoodbye("shutting down", absl::Now() + absl::Seconds(2));
  // Transfers are drained by now: this bounds calls and connections still
  // open. gRPC waits for clients to drop even idle connections until the
  // deadline, so a long one would only delay the exit.
  d.server->Shutdown(absl::Now() + kServerShutdownGrace);
  if (d.local != nullptr) d.local->Stop();
  d.engine->Stop();
}

int Run(const Config& config, const std::string& ready_file) {
  const sigset_t signals = BlockStopSignals();
  Daemon d;
  d.started_at = absl::Now();
  absl::Status started = StartEngine(config, d);
  if (started.ok()) started = StartServing(config, d);
  if (!started.ok()) {
    spdlog::critical("cannot start: {}", started.message());
    return 1;
  }
  if (absl::Status ready = AnnounceReady(config, ready_file, d); !ready.ok()) {
    spdlog::critical("cannot start: {}", ready.message());
    d.server->Shutdown(absl::Now() + kServerShutdownGrace);
    if (d.local != nullptr) d.local->Stop();
    d.engine->Stop();
    return 1;
  }
  Drain(config, WaitForStopSignal(signals), d);
  spdlog::info("stopped");
  return 0;
}

}  // namespace
}  // namespace xferd

int main(int argc, char** argv) {
  xferd::Flags flags;
  if (std::optional<int> exit_code = xferd::ParseFlags(argc, argv, flags)) return *exit_code;
  absl::StatusOr<xferd::Config> config = xferd::LoadConfig(flags);
  if (!config.ok()) {
    std::fprintf(stderr, "xferd: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (flags.check_config) {
    // The [tls] files too: key matches certificate, CA accepts it, names.
    if (absl::StatusOr<xferd::service::Security> s = xferd::service::SetUpSecurity(*config);
        !s.ok()) {
      std::fprintf(stderr, "xferd: %s\n", std::string(s.status().message()).c_str());
      return 2;
    }
    // And the metrics endpoint's secrets and certificate, as it loads them.
    if (absl::StatusOr<xferd::metrics::ScrapeSecurity> s =
            xferd::metrics::LoadScrapeSecurity(config->metrics);
        !s.ok()) {
      std::fprintf(stderr, "xferd: %s\n", std::string(s.status().message()).c_str());
      return 2;
    }
    std::printf("configuration OK\n");
    return 0;
  }
  if (absl::Status s = xferd::SetupLogging(config->log.level, config->log.json); !s.ok()) {
    std::fprintf(stderr, "xferd: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  // Big, short-lived allocations (a many-block request's offset arrays and
  // its plan, 24 bytes a block; large gRPC messages) get mappings of their
  // own, so their pages go back to the kernel when the transfer ends. Left
  // dynamic, glibc raises the threshold to the size of the first such block
  // freed, and a daemon that once planned a million blocks keeps that memory
  // resident for good. Setting it also fixes the trim threshold. 256 KiB:
  // a stream chunk's offset arrays (512 KiB each) are mapped too.
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  return xferd::Run(*config, flags.ready_file);
}
