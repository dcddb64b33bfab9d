#include "daemon/common/config.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <sstream>

// toml++ is Debian's shared build, which reports parse errors by exception; the
// exception is caught right here and turned into a Status.
#include <toml++/toml.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"
#include "daemon/common/host_port.h"

namespace xferd {
namespace {

// Reads one TOML table against a fixed set of known keys. Unknown keys are
// reported, because a misspelt option silently ignored is worse than an error.
class TableReader {
 public:
  using Handler = std::function<absl::Status(const toml::node&, const std::string& key)>;

  TableReader(std::string path) : path_(std::move(path)) {}

  void On(const std::string& key, Handler handler) { handlers_[key] = std::move(handler); }

  absl::Status Read(const toml::table& table) const {
    for (const auto& [key, node] : table) {
      const std::string name(key.str());
      const std::string full = path_.empty() ? name : absl::StrCat(path_, ".", name);
      auto it = handlers_.find(name);
      if (it == handlers_.end()) {
        std::vector<std::string> known;
        for (const auto& [k, h] : handlers_) known.push_back(k);
        return absl::InvalidArgumentError(absl::StrCat(
            "unknown config key '", full, "'; known keys here: ", absl::StrJoin(known, ", ")));
      }
      RETURN_IF_ERROR(it->second(node, full));
    }
    return absl::OkStatus();
  }

 private:
  std::string path_;
  std::map<std::string, Handler> handlers_;
};

absl::Status TypeError(const std::string& key, const char* expected) {
  return absl::InvalidArgumentError(absl::StrCat("config key '", key, "' must be ", expected));
}

TableReader::Handler String(std::string* out) {
  return [out](const toml::node& node, const std::string& key) -> absl::Status {
    auto v = node.value<std::string>();
    if (!v) return TypeError(key, "a string");
    *out = *v;
    return absl::OkStatus();
  };
}

TableReader::Handler StringList(std::vector<std::string>* out) {
  return [out](const toml::node& node, const std::string& key) -> absl::Status {
    const toml::array* array = node.as_array();
    if (array == nullptr) return TypeError(key, "an array of strings");
    out->clear();
    for (const toml::node& item : *array) {
      auto v = item.value<std::string>();
      if (!v) return TypeError(key, "an array of strings");
      out->push_back(*v);
    }
    return absl::OkStatus();
  };
}

TableReader::Handler Bool(bool* out) {
  return [out](const toml::node& node, const std::string& key) -> absl::Status {
    auto v = node.value<bool>();
    if (!v) return TypeError(key, "true or false");
    *out = *v;
    return absl::OkStatus();
  };
}

template <typename Int>
TableReader::Handler Integer(Int* out) {
  return [out](const toml::node& node, const std::string& key) -> absl::Status {
    // value_exact: value<int64_t>() would also convert a float, and one out
    // of int64's range (1e25) is undefined behaviour (found by config_fuzzer).
    auto v = node.value_exact<int64_t>();
    if (!v) return TypeError(key, "an integer");
    // Negative values compare as signed: cast to uint64_t they would pass for
    // huge ones and make -1 (verbs_gid_index = auto) "out of range".
    const bool in_range = *v < 0 ? *v >= static_cast<int64_t>(std::numeric_limits<Int>::min())
                                 : static_cast<uint64_t>(*v) <=
                                       static_cast<uint64_t>(std::numeric_limits<Int>::max());
    if (!in_range) {
      return absl::InvalidArgumentError(absl::StrCat("config key '", key, "' is out of range"));
    }
    *out = static_cast<Int>(*v);
    return absl::OkStatus();
  };
}

// Sizes may be integers (bytes) or strings with units ("64KiB").
TableReader::Handler Size(uint64_t* out) {
  return [out](const toml::node& node, const std::string& key) -> absl::Status {
    if (auto v = node.value_exact<int64_t>()) {
      if (*v < 0)
        return absl::InvalidArgumentError(absl::StrCat("config key '", key, "' is negative"));
      *out = static_cast<uint64_t>(*v);
      return absl::OkStatus();
    }
    auto s = node.value<std::string>();
    if (!s) return TypeError(key, "a size (bytes, or a string like \"64KiB\")");
    auto parsed = ParseSize(*s);
    if (!parsed.ok())
      return absl::InvalidArgumentError(absl::StrCat(key, ": ", parsed.status().message()));
    *out = *parsed;
    return absl::OkStatus();
  };
}

TableReader::Handler Duration(absl::Duration* out) {
  return [out](const toml::node& node, const std::string& key) -> absl::Status {
    auto s = node.value<std::string>();
    if (!s) return TypeError(key, "a duration string like \"10s\" or \"250ms\"");
    auto parsed = ParseDurationText(*s);
    if (!parsed.ok())
      return absl::InvalidArgumentError(absl::StrCat(key, ": ", parsed.status().message()));
    *out = *parsed;
    return absl::OkStatus();
  };
}

TableReader::Handler Table(std::function<void(TableReader&)> define, std::string path) {
  return [define = std::move(define), path](const toml::node& node,
                                            const std::string& key) -> absl::Status {
    const toml::table* table = node.as_table();
    if (table == nullptr) return TypeError(key, "a table");
    TableReader reader(path);
    define(reader);
    return reader.Read(*table);
  };
}

void DefineServer(TableReader& r, ServerConfig& c) {
  r.On("listen", String(&c.listen));
  r.On("unix_socket", String(&c.unix_socket));
  r.On("unix_socket_mode", Integer(&c.unix_socket_mode));
  r.On("advertise", String(&c.advertise));
}

void DefineTransport(TableReader& r, TransportConfig& c) {
  r.On("kind", [&c](const toml::node& node, const std::string& key) -> absl::Status {
    auto s = node.value<std::string>();
    if (!s) return TypeError(key, "\"auto\", \"tcp\" or \"verbs\"");
    ASSIGN_OR_RETURN(c.kind, ParseTransportChoice(*s));
    return absl::OkStatus();
  });
  r.On("require_rdma", Bool(&c.require_rdma));
  r.On("tcp_data_listen", String(&c.tcp_data_listen));
  r.On("tcp_advertise_host", String(&c.tcp_advertise_host));
  r.On("tcp_socket_buffer", Size(&c.tcp_socket_buffer));
  r.On("tcp_user_timeout", Duration(&c.tcp_user_timeout));
  r.On("tcp_encryption", String(&c.tcp_encryption));
  r.On("verbs_device", String(&c.verbs_device));
  r.On("verbs_devices", [&c](const toml::node& node, const std::string& key) -> absl::Status {
    if (auto all = node.value<std::string>()) {
      if (*all != "all") {
        return absl::InvalidArgumentError(absl::StrCat(
            "config key '", key, "' must be \"all\" or an array of device names, like [\"mlx5_0\", "
            "\"mlx5_1\"]; got \"", *all, "\""));
      }
      c.verbs_devices = {"all"};
      return absl::OkStatus();
    }
    return StringList(&c.verbs_devices)(node, key);
  });
  r.On("verbs_pairing", String(&c.verbs_pairing));
  r.On("verbs_rail_prefix_bits", Integer(&c.verbs_rail_prefix_bits));
  r.On("verbs_port", Integer(&c.verbs_port));
  r.On("verbs_gid_index", Integer(&c.verbs_gid_index));
  r.On("verbs_mtu", Integer(&c.verbs_mtu));
  r.On("verbs_qp_timeout", Integer(&c.verbs_qp_timeout));
  r.On("verbs_retry_count", Integer(&c.verbs_retry_count));
  r.On("verbs_mr_chunk", Size(&c.verbs_mr_chunk));
}

void DefineEngine(TableReader& r, EngineConfig& c) {
  r.On("pollers", Integer(&c.pollers));
  r.On("slice_size", Size(&c.slice_size));
  r.On("lane_depth", Integer(&c.lane_depth));
  r.On("max_inflight_transfers", Integer(&c.max_inflight_transfers));
  r.On("history", Integer(&c.history));
  r.On("spin", Duration(&c.spin));
  r.On("drain_timeout", Duration(&c.drain_timeout));
}

void DefineRegions(TableReader& r, RegionConfig& c) {
  r.On("max_registered_bytes", Size(&c.max_registered_bytes));
  r.On("shm_dir", String(&c.shm_dir));
  r.On("file_dirs", StringList(&c.file_dirs));
  r.On("file_mode", Integer(&c.file_mode));
}

void DefineLog(TableReader& r, LogConfig& c) {
  r.On("level", String(&c.level));
  r.On("json", Bool(&c.json));
}

void DefineTls(TableReader& r, TlsConfig& c) {
  r.On("cert", String(&c.cert));
  r.On("key", String(&c.key));
  r.On("ca", String(&c.ca));
  r.On("client_ca", String(&c.client_ca));
  r.On("allowed_clients", StringList(&c.allowed_clients));
}

void DefineMetrics(TableReader& r, MetricsConfig& c) {
  r.On("listen", String(&c.listen));
  r.On("basic_auth_user", String(&c.basic_auth_user));
  r.On("basic_auth_password_file", String(&c.basic_auth_password_file));
  r.On("bearer_token_file", String(&c.bearer_token_file));
}

void DefineCluster(TableReader& r, ClusterConfig& c) {
  r.On("etcd", StringList(&c.etcd));
  r.On("prefix", String(&c.prefix));
  r.On("lease_ttl", Duration(&c.lease_ttl));
  r.On("ca", String(&c.ca));
  r.On("cert", String(&c.cert));
  r.On("key", String(&c.key));
}

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
  return absl::OkStatus();
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

// tcp_encryption: a known value, and "tls" only with certificates to use.
absl::Status ValidateTcpEncryption(const Config& c) {
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

}  // namespace

absl::StatusOr<TransportChoice> ParseTransportChoice(absl::string_view text) {
  if (text == "auto") return TransportChoice::kAuto;
  if (text == "tcp") return TransportChoice::kTcp;
  if (text == "verbs") return TransportChoice::kVerbs;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", text, "': use auto, tcp or verbs"));
}

bool TcpEncrypted(const Config& config) {
  const std::string& value = config.transport.tcp_encryption;
  return value == "tls" || (value.empty() && config.tls.enabled());
}

absl::string_view TransportChoiceName(TransportChoice choice) {
  switch (choice) {
    case TransportChoice::kAuto:
      return "auto";
    case TransportChoice::kTcp:
      return "tcp";
    case TransportChoice::kVerbs:
      return "verbs";
  }
  return "?";
}

absl::StatusOr<Config> ParseConfig(absl::string_view toml_text, absl::string_view origin) {
  toml::table root;
  try {
    root = toml::parse(std::string_view(toml_text.data(), toml_text.size()), std::string(origin));
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    return absl::InvalidArgumentError(absl::StrCat(origin, ":", where.line, ":", where.column, ": ",
                                                   std::string(e.description())));
  }
  Config config;
  TableReader top("");
  top.On("node_id", String(&config.node_id));
  top.On("server", Table([&](TableReader& r) { DefineServer(r, config.server); }, "server"));
  top.On("transport",
         Table([&](TableReader& r) { DefineTransport(r, config.transport); }, "transport"));
  top.On("engine", Table([&](TableReader& r) { DefineEngine(r, config.engine); }, "engine"));
  top.On("regions", Table([&](TableReader& r) { DefineRegions(r, config.regions); }, "regions"));
  top.On("log", Table([&](TableReader& r) { DefineLog(r, config.log); }, "log"));
  top.On("tls", Table([&](TableReader& r) { DefineTls(r, config.tls); }, "tls"));
  top.On("metrics", Table([&](TableReader& r) { DefineMetrics(r, config.metrics); }, "metrics"));
  top.On("cluster", Table([&](TableReader& r) { DefineCluster(r, config.cluster); }, "cluster"));
  absl::Status status = top.Read(root);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", status.message()));
  }
  return config;
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open config file ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseConfig(text.str(), path);
}

namespace {

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
  return CheckReadable({{"metrics.basic_auth_password_file", &m.basic_auth_password_file},
                        {"metrics.bearer_token_file", &m.bearer_token_file}});
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
