// The daemon's configuration: defaults, loading from TOML, validation.
// main.cc loads /etc/xferd/xferd.toml (or --config), then applies command-line
// overrides, then calls Validate(). Every error names the key and the fix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/common/tenant_config.h"
#include "daemon/common/transport_config.h"

namespace xferd {

struct ServerConfig {
  // gRPC listen address for clients and peers ("" disables TCP listening).
  std::string listen = "127.0.0.1:7300";
  // Unix socket for local clients ("" disables it).
  std::string unix_socket = "/run/xferd/xferd.sock";
  // Permission bits of the unix socket: who may talk to the daemon locally.
  uint32_t unix_socket_mode = 0660;
  // Serve local clients' request rings on "<unix_socket>.local" (same mode);
  // without, local clients use gRPC alone.
  bool local_rings = true;
  // Local sessions with rings open at once, at most.
  uint32_t local_max_sessions = 1024;
  // The address peers should use to call back; default: the bound listen address.
  std::string advertise;
};

// [priorities]: how the transfer classes share lanes and admission
// (docs/priorities.md). Critical always goes first; the others share what
// it leaves by these weights.
struct PriorityConfig {
  uint32_t normal_weight = 8;
  uint32_t bulk_weight = 2;
  uint32_t background_weight = 1;
  // Bytes a lane may hold (posted, not yet completed) before an op below
  // critical may join them: what a critical op waits behind on its lane.
  // A transfer whose slices are larger still keeps two of them in flight.
  uint64_t lane_bytes = 2 << 20;
  // Of engine.max_inflight_transfers, this many only critical transfers
  // may take.
  uint32_t critical_reserve = 64;
};

struct EngineConfig {
  // Poller threads; each owns one lane to every peer.
  uint32_t pollers = 2;
  // Default slice size of a transfer.
  uint64_t slice_size = 1 << 20;
  // Whether a transfer that does not say verifies its blocks end to end
  // (docs/integrity.md).
  bool verify = false;
  // Slices a lane may have in flight (send queue depth).
  uint32_t lane_depth = 64;
  // Transfers queued or running at once; beyond it, writes get RESOURCE_EXHAUSTED.
  uint32_t max_inflight_transfers = 4096;
  // Finished transfers kept for GetTransfer/ListTransfers.
  uint32_t history = 10000;
  // How long an idle poller keeps spinning before it sleeps, at least; up to
  // spin_max while its sleeps are short (work comes back within spin_max).
  absl::Duration spin = absl::Microseconds(50);
  absl::Duration spin_max = absl::Microseconds(200);
  // The pollers' time slice under the kernel's fair scheduler (Linux 6.12
  // and later; 0: the kernel's default): a short one lets a poller woken on
  // a busy host preempt the thread that runs there (docs/priorities.md).
  absl::Duration poller_slice;
  // On SIGTERM: how long in-flight transfers may take before they are failed.
  absl::Duration drain_timeout = absl::Seconds(10);
  PriorityConfig priorities;
  // [tenants.<name>], by name; "default" only if configured.
  std::vector<TenantConfig> tenants;
};

struct RegionConfig {
  // Upper bound on the bytes of all registered regions together (0 = none).
  uint64_t max_registered_bytes = 0;
  // The only directories file-backed regions may be in (the package makes
  // the default); empty refuses file regions.
  std::vector<std::string> file_dirs = {"/var/lib/xferd/data"};
  // Mode of the files a registration creates.
  uint32_t file_mode = 0640;
};

struct LogConfig {
  std::string level = "info";  // trace, debug, info, warn, error
  bool json = false;           // one JSON object per line instead of text
};

// Authentication (mTLS) of peers and remote clients. All PEM files. Without
// cert, key and ca the daemon runs in an explicitly insecure mode (warned at
// start-up and reported in NodeInfo.security).
struct TlsConfig {
  // This daemon's certificate (chain) and private key, presented to peers and
  // remote clients. Its DNS SANs (or CN without SANs) must include node_id,
  // and the host of every address peers dial (DNS or IP SAN).
  std::string cert;
  std::string key;
  // CA bundle that signs daemon certificates: verifies peers both ways.
  std::string ca;
  // Optional CA bundle for remote clients' certificates (default: ca). Its
  // certificates reach the client API only, never the peer service.
  std::string client_ca;
  // Optional: certificate names (DNS SAN, or CN) allowed to use the client
  // API over TCP; empty = any certificate the CAs verify.
  std::vector<std::string> allowed_clients;

  // Any key set: Validate then requires cert, key and ca.
  bool enabled() const {
    return !cert.empty() || !key.empty() || !ca.empty() || !client_ca.empty() ||
           !allowed_clients.empty();
  }
};

struct MetricsConfig {
  // Prometheus /metrics address, e.g. "127.0.0.1:9300" ("" disables it).
  std::string listen;
  // Scrapes must authenticate: HTTP basic auth with this user and the
  // password in the file, and/or the bearer token in the file (files keep
  // secrets out of the world-readable configuration; a trailing newline is
  // ignored).
  std::string basic_auth_user;
  std::string basic_auth_password_file;
  std::string bearer_token_file;
  // HTTPS instead of HTTP: this certificate (PEM, leaf first) and its key.
  // With tls_client_ca (a PEM CA bundle), scrapers must present a
  // certificate one of its CAs signed.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
};

// The cluster directory on etcd (daemon/cluster/). Without etcd endpoints
// the daemon runs alone, exactly as before: peers only by address.
struct ClusterConfig {
  // etcd client endpoints, "host:port" each (several: any may answer).
  std::vector<std::string> etcd;
  // Every key this daemon writes or reads starts with it: one per tenant or
  // cluster, so fleets can share an etcd without seeing each other.
  std::string prefix = "/xferd/";
  // The lease the daemon's keys live under: a crashed daemon vanishes from
  // the directory this long after its last keep-alive.
  absl::Duration lease_ttl = absl::Seconds(10);
  // TLS to etcd (PEM files): ca alone verifies etcd; cert and key add a
  // client certificate. None: plaintext.
  std::string ca;
  std::string cert;
  std::string key;

  bool enabled() const { return !etcd.empty(); }
};

struct Config {
  // Name peers use for this daemon; default "<hostname>:<grpc port>".
  std::string node_id;
  ServerConfig server;
  TransportConfig transport;
  EngineConfig engine;
  RegionConfig regions;
  LogConfig log;
  TlsConfig tls;
  MetricsConfig metrics;
  ClusterConfig cluster;
};

// Parses TOML text. Unknown keys are errors (a typo must not be ignored).
// `origin` names the source in messages (a path or "<string>").
absl::StatusOr<Config> ParseConfig(absl::string_view toml_text, absl::string_view origin);

// Reads and parses a file. NOT_FOUND if it does not exist.
absl::StatusOr<Config> LoadConfigFile(const std::string& path);

// Checks ranges and combinations; INVALID_ARGUMENT names the offending key.
absl::Status Validate(const Config& config);

// The contents of the file config key `key` names. INVALID_ARGUMENT names
// the key and the path if it cannot be read.
absl::StatusOr<std::string> ReadKeyFile(absl::string_view key, const std::string& path);

absl::StatusOr<TransportChoice> ParseTransportChoice(absl::string_view text);
// Whether the TCP transport encrypts its data lanes: transport.tcp_encryption,
// or by default whenever [tls] is configured.
bool TcpEncrypted(const Config& config);
absl::string_view TransportChoiceName(TransportChoice choice);

}  // namespace xferd
