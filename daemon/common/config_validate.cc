// Validate(): the checks a parsed Config must pass before the daemon uses it
// (values in range, keys that depend on each other, files readable now).
// Parsing lives in config.cc.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/config.h"
#include "daemon/common/host_port.h"

namespace xferd {
namespace {

absl::Status InvalidKey(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("config key '", key, "' ", why));
}

// Keys that name files the daemon reads at start-up: each set one must be
// readable now, so a typo fails --check-config, not the first use.
absl::Status CheckReadable(
    std::initializer_list<std::pair<const char*, const std::string*>> files) {
  for (const auto& [key, path] : files) {
    if (!path->empty() && ::access(path->c_str(), R_OK) != 0) {
      return InvalidKey(
          key, absl::StrCat("names ", *path, ", which cannot be read: ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateServer(const ServerConfig& server) {
  if (server.listen.empty() && server.unix_socket.empty()) {
    return InvalidKey("server.listen",
                      "and server.unix_socket are both empty: nothing to serve on");
  }
  if (server.unix_socket_mode > 0777)
    return InvalidKey("server.unix_socket_mode", "must be <= 0777");
  if (server.local_max_sessions == 0)
    return InvalidKey("server.local_max_sessions", "must be at least 1 (local_rings = false "
                                                   "turns the rings off)");
  return absl::OkStatus();
}

absl::Status ValidatePriorities(const PriorityConfig& p, uint32_t max_inflight_transfers) {
  for (const auto& [key, weight] :
       {std::pair<const char*, uint32_t>{"normal_weight", p.normal_weight},
        {"bulk_weight", p.bulk_weight},
        {"background_weight", p.background_weight}}) {
    if (weight < 1 || weight > 1000) {
      return InvalidKey(absl::StrCat("priorities.", key),
                        "must be between 1 and 1000 (a weight of 0 would starve the class)");
    }
  }
  if (p.lane_bytes < 4096 || p.lane_bytes > (1ull << 30)) {
    return InvalidKey("priorities.lane_bytes", "must be between 4KiB and 1GiB");
  }
  if (p.critical_reserve >= max_inflight_transfers) {
    return InvalidKey(
        "priorities.critical_reserve",
        absl::StrCat("is ", p.critical_reserve,
                     " (default 64): it must be below engine.max_inflight_transfers (",
                     max_inflight_transfers, "), whose rest the other classes use"));
  }
  return absl::OkStatus();
}

absl::Status ValidateEngine(const EngineConfig& engine) {
  if (engine.pollers < 1 || engine.pollers > 64) {
    return InvalidKey("engine.pollers", "must be between 1 and 64");
  }
  if (engine.slice_size < 4096 || engine.slice_size > (16u << 20)) {
    return InvalidKey("engine.slice_size", "must be between 4KiB and 16MiB");
  }
  if (engine.lane_depth < 2 || engine.lane_depth > 4096) {
    return InvalidKey("engine.lane_depth", "must be between 2 and 4096");
  }
  if (engine.max_inflight_transfers < 1 || engine.max_inflight_transfers > (1u << 20)) {
    return InvalidKey("engine.max_inflight_transfers", "must be between 1 and 1048576");
  }
  if (engine.history > (1u << 22)) return InvalidKey("engine.history", "must be <= 4194304");
  if (engine.spin > absl::Seconds(1)) return InvalidKey("engine.spin", "must be <= 1s");
  if (engine.spin_max > absl::Seconds(1)) return InvalidKey("engine.spin_max", "must be <= 1s");
  if (engine.poller_slice != absl::ZeroDuration() &&
      (engine.poller_slice < absl::Microseconds(100) || engine.poller_slice > absl::Seconds(0.1))) {
    return InvalidKey("engine.poller_slice",
                      "must be 0 (the kernel's default) or between 100us and 100ms, the kernel's "
                      "range");
  }
  return ValidatePriorities(engine.priorities, engine.max_inflight_transfers);
}

absl::Status ValidateTcp(const TransportConfig& transport) {
  if (transport.tcp_socket_buffer > (1u << 30)) {
    return InvalidKey("transport.tcp_socket_buffer", "must be <= 1GiB");
  }
  if (transport.tcp_user_timeout < absl::Seconds(1) ||
      transport.tcp_user_timeout > absl::Hours(1)) {
    return InvalidKey("transport.tcp_user_timeout", "must be between 1s and 1h");
  }
  return absl::OkStatus();
}

absl::Status ValidateVerbs(const TransportConfig& transport) {
  if (transport.numa_pinning != "auto" && transport.numa_pinning != "off") {
    return InvalidKey("transport.numa_pinning", "must be \"auto\" or \"off\"");
  }
  if (transport.verbs_qp_timeout > 31) {
    return InvalidKey("transport.verbs_qp_timeout", "must be <= 31");
  }
  if (transport.verbs_retry_count > 7) {
    return InvalidKey("transport.verbs_retry_count", "must be <= 7");
  }
  if (transport.verbs_mr_chunk < (16u << 20)) {
    return InvalidKey("transport.verbs_mr_chunk", "must be at least 16MiB (the largest slice)");
  }
  if (!transport.verbs_devices.empty() && !transport.verbs_device.empty()) {
    return InvalidKey("transport.verbs_devices",
                      "cannot be combined with transport.verbs_device: list that device in "
                      "verbs_devices instead");
  }
  for (const std::string& name : transport.verbs_devices) {
    if (name.empty() || (name == "all" && transport.verbs_devices.size() > 1)) {
      return InvalidKey("transport.verbs_devices",
                        "must be \"all\" or a list of non-empty device names");
    }
  }
  if (transport.verbs_pairing != "index" && transport.verbs_pairing != "rail") {
    return InvalidKey("transport.verbs_pairing", "must be \"index\" or \"rail\"");
  }
  if (transport.verbs_rail_prefix_bits > 128) {
    return InvalidKey("transport.verbs_rail_prefix_bits", "must be 0 (auto) or 1..128");
  }
  if (transport.verbs_gid_index < -1 || transport.verbs_gid_index > 255) {
    return InvalidKey("transport.verbs_gid_index", "must be -1 (auto) or 0..255");
  }
  switch (transport.verbs_mtu) {
    case 0:
    case 256:
    case 512:
    case 1024:
    case 2048:
    case 4096:
      return absl::OkStatus();
    default:
      return InvalidKey("transport.verbs_mtu", "must be 0 (auto), 256, 512, 1024, 2048 or 4096");
  }
}

// [tls]: all of cert, key and ca, or nothing; every file readable now, so a
// typo fails at start-up (and in --check-config), not at the first peer.
absl::Status ValidateTls(const TlsConfig& tls) {
  if (!tls.enabled()) return absl::OkStatus();
  const std::pair<const char*, const std::string*> files[] = {{"tls.cert", &tls.cert},
                                                              {"tls.key", &tls.key},
                                                              {"tls.ca", &tls.ca},
                                                              {"tls.client_ca", &tls.client_ca}};
  for (const auto& [key, path] : files) {
    const bool optional = path == &tls.client_ca;
    if (path->empty() && !optional) {
      return InvalidKey(key,
                        "is not set: mTLS needs tls.cert, tls.key and tls.ca together (or none of "
                        "them for the insecure mode)");
    }
    RETURN_IF_ERROR(CheckReadable({{key, path}}));
  }
  for (const std::string& name : tls.allowed_clients) {
    if (name.empty()) return InvalidKey("tls.allowed_clients", "contains an empty name");
  }
  return absl::OkStatus();
}

// tcp_encryption: a known value, and "tls" only with certificates to use;
// tcp_kernel_tls: a known value.
absl::Status ValidateTcpEncryption(const Config& c) {
  const std::string& kernel = c.transport.tcp_kernel_tls;
  if (kernel != "auto" && kernel != "send" && kernel != "off") {
    return InvalidKey("transport.tcp_kernel_tls", "must be \"auto\", \"send\" or \"off\"");
  }
  const std::string& value = c.transport.tcp_encryption;
  if (!value.empty() && value != "tls" && value != "off") {
    return InvalidKey("transport.tcp_encryption", "must be \"tls\" or \"off\"");
  }
  if (value == "tls" && !c.tls.enabled()) {
    return InvalidKey("transport.tcp_encryption",
                      "is \"tls\" but [tls] is not configured: the data lanes use the daemon's "
                      "certificates, so set tls.cert, tls.key and tls.ca (or set "
                      "tcp_encryption = \"off\")");
  }
  return absl::OkStatus();
}

// [cluster]: endpoints that parse, a prefix that cannot swallow another
// (it starts and ends with '/'), a TTL etcd accepts, TLS files readable now.
absl::Status ValidateCluster(const ClusterConfig& cluster) {
  const bool any_set = !cluster.ca.empty() || !cluster.cert.empty() || !cluster.key.empty();
  if (!cluster.enabled()) {
    if (any_set) return InvalidKey("cluster.etcd", "is empty but cluster TLS files are set");
    return absl::OkStatus();
  }
  for (const std::string& endpoint : cluster.etcd) {
    if (!ParseHostPort(endpoint).ok()) {
      return InvalidKey("cluster.etcd", absl::StrCat("has '", endpoint,
                                                     "': each endpoint must be host:port, e.g. "
                                                     "\"10.0.0.5:2379\""));
    }
  }
  if (cluster.prefix.size() < 2 || cluster.prefix.front() != '/' || cluster.prefix.back() != '/') {
    return InvalidKey("cluster.prefix",
                      "must start and end with '/', e.g. \"/xferd/\" or \"/tenant-a/xferd/\"");
  }
  if (cluster.lease_ttl < absl::Seconds(2) || cluster.lease_ttl > absl::Hours(1)) {
    return InvalidKey("cluster.lease_ttl", "must be between 2s and 1h");
  }
  if (cluster.cert.empty() != cluster.key.empty()) {
    return InvalidKey(cluster.cert.empty() ? "cluster.cert" : "cluster.key",
                      "is not set: a client certificate to etcd needs cluster.cert and "
                      "cluster.key together");
  }
  if (!cluster.cert.empty() && cluster.ca.empty()) {
    return InvalidKey("cluster.ca",
                      "is not set: TLS to etcd needs the CA that signed etcd's "
                      "certificate");
  }
  return CheckReadable({{"cluster.ca", &cluster.ca},
                        {"cluster.cert", &cluster.cert},
                        {"cluster.key", &cluster.key}});
}

// [metrics]: scrape security whose parts go together, files readable now
// (their contents are checked by metrics::LoadScrapeSecurity).
absl::Status ValidateMetrics(const MetricsConfig& m) {
  if (m.basic_auth_user.empty() != m.basic_auth_password_file.empty()) {
    return InvalidKey(
        m.basic_auth_user.empty() ? "metrics.basic_auth_user" : "metrics.basic_auth_password_file",
        "is not set: basic auth needs metrics.basic_auth_user and "
        "metrics.basic_auth_password_file together");
  }
  if (absl::StrContains(m.basic_auth_user, ':')) {
    return InvalidKey("metrics.basic_auth_user", "must not contain ':' (RFC 7617)");
  }
  if (m.tls_cert.empty() != m.tls_key.empty()) {
    return InvalidKey(m.tls_cert.empty() ? "metrics.tls_cert" : "metrics.tls_key",
                      "is not set: HTTPS needs metrics.tls_cert and metrics.tls_key together");
  }
  if (!m.tls_client_ca.empty() && m.tls_cert.empty()) {
    return InvalidKey("metrics.tls_client_ca",
                      "needs HTTPS: client certificates are checked in the TLS handshake, so set "
                      "metrics.tls_cert and metrics.tls_key too");
  }
  return CheckReadable({{"metrics.basic_auth_password_file", &m.basic_auth_password_file},
                        {"metrics.bearer_token_file", &m.bearer_token_file},
                        {"metrics.tls_cert", &m.tls_cert},
                        {"metrics.tls_key", &m.tls_key},
                        {"metrics.tls_client_ca", &m.tls_client_ca}});
}

// [tenants.<name>]: names that can stand in a message and a metric label,
// a known highest class, and each uid, gid and certificate name in one
// tenant only (who a client is must not depend on the file's order).
absl::Status ValidateTenants(const std::vector<TenantConfig>& tenants) {
  std::map<std::string, std::string> owner;  // "uid 1001" -> tenant
  for (const TenantConfig& t : tenants) {
    const std::string key = absl::StrCat("tenants.", t.name);
    if (t.name.empty() || t.name.size() > 64 ||
        !std::all_of(t.name.begin(), t.name.end(), [](char ch) {
          return absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
        })) {
      return InvalidKey(key, "must be named with 1 to 64 letters, digits, '_' or '-'");
    }
    static constexpr const char* kClasses[] = {"critical", "normal", "bulk", "background"};
    if (std::find(std::begin(kClasses), std::end(kClasses), t.max_priority) == std::end(kClasses)) {
      return InvalidKey(absl::StrCat(key, ".max_priority"),
                        "must be \"critical\", \"normal\", \"bulk\" or \"background\"");
    }
    if (t.weight < 1 || t.weight > 1000) {
      return InvalidKey(absl::StrCat(key, ".weight"),
                        "must be between 1 and 1000 (a weight of 0 would starve the tenant)");
    }
    if (t.max_bandwidth != 0 && t.max_bandwidth < (64u << 10)) {
      return InvalidKey(absl::StrCat(key, ".max_bandwidth"),
                        "must be 0 (no cap) or at least 64KiB (bytes per second)");
    }
    if (t.name == kDefaultTenant && t.admin) {
      return InvalidKey(absl::StrCat(key, ".admin"),
                        "cannot be true: the default tenant is whoever is not identified (give "
                        "operators a tenant of their own, by uid, gid or certificate)");
    }
    if (t.name == kDefaultTenant && (!t.uids.empty() || !t.gids.empty() || !t.cert_names.empty())) {
      return InvalidKey(key,
                        "is whoever matches no other tenant: it takes no uids, gids or "
                        "cert_names (give those to a tenant of their own)");
    }
    std::vector<std::string> ids;
    for (uint32_t uid : t.uids) ids.push_back(absl::StrCat("uid ", uid));
    for (uint32_t gid : t.gids) ids.push_back(absl::StrCat("gid ", gid));
    for (const std::string& name : t.cert_names) {
      if (name.empty()) return InvalidKey(absl::StrCat(key, ".cert_names"), "has an empty name");
      ids.push_back(absl::StrCat("certificate name '", name, "'"));
    }
    for (const std::string& id : ids) {
      auto [it, fresh] = owner.emplace(id, t.name);
      if (!fresh && it->second != t.name) {
        return InvalidKey(key, absl::StrCat("claims ", id, ", which tenants.", it->second,
                                            " claims too: a client must have one tenant"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Validate(const Config& c) {
  RETURN_IF_ERROR(ValidateServer(c.server));
  RETURN_IF_ERROR(ValidateEngine(c.engine));
  RETURN_IF_ERROR(ValidateTcp(c.transport));
  RETURN_IF_ERROR(ValidateVerbs(c.transport));
  for (const std::string& dir : c.regions.file_dirs) {
    if (dir.empty() || dir[0] != '/' || dir == "/") {
      return InvalidKey("regions.file_dirs",
                        "must list absolute directories other than \"/\", e.g. "
                        "[\"/var/lib/xferd/data\"]");
    }
  }
  if (c.regions.file_mode > 0777) return InvalidKey("regions.file_mode", "must be <= 0o777");
  if (c.transport.require_rdma && c.transport.kind == TransportChoice::kTcp) {
    return InvalidKey("transport.require_rdma", "is true but transport.kind is \"tcp\"");
  }
  if (!c.metrics.listen.empty() && !ParseHostPort(c.metrics.listen).ok()) {
    return InvalidKey("metrics.listen",
                      "must be host:port, e.g. \"127.0.0.1:9300\" (\"\" disables)");
  }
  RETURN_IF_ERROR(ValidateMetrics(c.metrics));
  static constexpr const char* kLevels[] = {"trace", "debug", "info", "warn", "error"};
  if (std::find(std::begin(kLevels), std::end(kLevels), c.log.level) == std::end(kLevels)) {
    return InvalidKey("log.level", "must be one of trace, debug, info, warn, error");
  }
  RETURN_IF_ERROR(ValidateCluster(c.cluster));
  RETURN_IF_ERROR(ValidateTls(c.tls));
  RETURN_IF_ERROR(ValidateTenants(c.engine.tenants));
  return ValidateTcpEncryption(c);
}

absl::StatusOr<std::string> ReadKeyFile(absl::string_view key, const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("config key '", key, "': cannot read ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace xferd
