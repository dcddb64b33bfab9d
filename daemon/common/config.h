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

namespace xferd {

enum class TransportChoice { kAuto, kTcp, kVerbs };

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

struct TransportConfig {
  TransportChoice kind = TransportChoice::kAuto;
  // Fail at start-up instead of falling back to TCP when no RDMA device works.
  bool require_rdma = false;
  // TCP transport: data-plane listen address (port 0 = any free port).
  std::string tcp_data_listen = "127.0.0.1:0";
  // TCP transport: the host peers should connect data lanes to; default: the
  // host of tcp_data_listen.
  std::string tcp_advertise_host;
  // TCP transport: kernel socket buffer sizes. 0 (the default) leaves them
  // to the kernel's autotuning, which a fixed size turns off: on loopback a
  // fixed 4 MiB cost 30% more CPU per GiB (data copied into the socket goes
  // cold before the receiver copies it out). Set it for long fat paths whose
  // bandwidth-delay product exceeds net.ipv4.tcp_rmem's maximum.
  uint64_t tcp_socket_buffer = 0;
  // TCP transport: data a peer leaves unacknowledged this long breaks the
  // lane (TCP_USER_TIMEOUT): how long a partition may last before transfers
  // on it fail and the next write reconnects.
  absl::Duration tcp_user_timeout = absl::Seconds(10);
  // TCP transport: "tls" (TLS 1.3 on every data lane, with the [tls]
  // certificates) or "off"; empty: "tls" when [tls] is configured, else
  // "off". See TcpEncrypted().
  std::string tcp_encryption;
  // TCP transport, encrypted lanes: how much of TLS the kernel may do.
  // "auto": both directions where the kernel has the "tls" module (OpenSSL
  // sends, the daemon installs receive), else user space; "send": OpenSSL's
  // send offload only; "off": OpenSSL does every record.
  std::string tcp_kernel_tls = "auto";
  // Verbs transport choices; empty/0 means "pick automatically".
  std::string verbs_device;
  uint32_t verbs_port = 0;
  int32_t verbs_gid_index = -1;
  uint32_t verbs_mtu = 0;
  // Several devices at once: their names, or {"all"} for every device with
  // an ACTIVE port. Empty: the one device of verbs_device (or the first
  // usable one). verbs_port, verbs_gid_index and verbs_mtu apply to each.
  std::vector<std::string> verbs_devices;
  // How local devices pair with a peer's: "index" (the i-th with the i-th;
  // the larger side's extra devices stay idle towards that peer) or "rail"
  // (devices whose GIDs share a prefix: the same subnet).
  std::string verbs_pairing = "index";
  // Pin each poller to the CPUs of its home device's NUMA node (poller i:
  // device i % devices), where sysfs names the node: "auto" or "off".
  std::string numa_pinning = "auto";
  // Rail pairing: GID bits that must match; 0 = 120 (a /24) for IPv4-mapped
  // RoCE GIDs, 64 (the subnet prefix) otherwise.
  uint32_t verbs_rail_prefix_bits = 0;
  // RC retransmission: timeout exponent (4.096 us * 2^t) and retry count.
  // 14 and 3 let a dead peer surface in well under 2 s.
  uint32_t verbs_qp_timeout = 14;
  uint32_t verbs_retry_count = 3;
  // Regions larger than this are registered as several MRs, in parallel
  // (at least 16MiB, the largest slice).
  uint64_t verbs_mr_chunk = 1ull << 30;
  // Peers get region keys that work only on their own link's queue pairs
  // (type-2 memory windows). false: the MRs' own keys, which every queue
  // pair of the daemon's protection domain accepts; only for devices
  // without type-2B memory windows.
  bool verbs_memory_windows = true;
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
