#include "daemon/common/config.h"

#include <fstream>
#include <functional>
#include <map>
#include <sstream>

// toml++ is Debian's shared build, which reports parse errors by exception; the
// exception is caught right here and turned into a Status.
#include <toml++/toml.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"

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

// A key this daemon no longer reads: an error that says why and what to do,
// rather than "unknown key" for a config that used to load.
TableReader::Handler Removed(const char* why) {
  return [why](const toml::node&, const std::string& key) -> absl::Status {
    return absl::InvalidArgumentError(absl::StrCat("config key '", key, "' is gone: ", why));
  };
}

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
  r.On("local_rings", Bool(&c.local_rings));
  r.On("local_max_sessions", Integer(&c.local_max_sessions));
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
  r.On("tcp_kernel_tls", String(&c.tcp_kernel_tls));
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
  r.On("numa_pinning", String(&c.numa_pinning));
  r.On("verbs_rail_prefix_bits", Integer(&c.verbs_rail_prefix_bits));
  r.On("verbs_port", Integer(&c.verbs_port));
  r.On("verbs_gid_index", Integer(&c.verbs_gid_index));
  r.On("verbs_mtu", Integer(&c.verbs_mtu));
  r.On("verbs_qp_timeout", Integer(&c.verbs_qp_timeout));
  r.On("verbs_retry_count", Integer(&c.verbs_retry_count));
  r.On("verbs_mr_chunk", Size(&c.verbs_mr_chunk));
  r.On("verbs_memory_windows", Bool(&c.verbs_memory_windows));
}

void DefineEngine(TableReader& r, EngineConfig& c) {
  r.On("pollers", Integer(&c.pollers));
  r.On("slice_size", Size(&c.slice_size));
  r.On("verify", Bool(&c.verify));
  r.On("lane_depth", Integer(&c.lane_depth));
  r.On("max_inflight_transfers", Integer(&c.max_inflight_transfers));
  r.On("history", Integer(&c.history));
  r.On("spin", Duration(&c.spin));
  r.On("spin_max", Duration(&c.spin_max));
  r.On("poller_slice", Duration(&c.poller_slice));
  r.On("drain_timeout", Duration(&c.drain_timeout));
}

void DefinePriorities(TableReader& r, PriorityConfig& c) {
  r.On("normal_weight", Integer(&c.normal_weight));
  r.On("bulk_weight", Integer(&c.bulk_weight));
  r.On("background_weight", Integer(&c.background_weight));
  r.On("lane_bytes", Size(&c.lane_bytes));
  r.On("critical_reserve", Integer(&c.critical_reserve));
}

void DefineRegions(TableReader& r, RegionConfig& c) {
  r.On("max_registered_bytes", Size(&c.max_registered_bytes));
  r.On("file_dirs", StringList(&c.file_dirs));
  r.On("shm_dir", Removed("SHM regions are sealed memfds with no file to place (local "
                          "clients map them through the local socket); delete the key"));
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
  r.On("tls_cert", String(&c.tls_cert));
  r.On("tls_key", String(&c.tls_key));
  r.On("tls_client_ca", String(&c.tls_client_ca));
}

// Unsigned ids (uids, gids) as a TOML array of integers.
TableReader::Handler IdList(std::vector<uint32_t>* out) {
  return [out](const toml::node& node, const std::string& key) -> absl::Status {
    const toml::array* array = node.as_array();
    if (array == nullptr) return TypeError(key, "an array of integers (ids)");
    out->clear();
    for (const toml::node& item : *array) {
      uint32_t id = 0;
      RETURN_IF_ERROR(Integer(&id)(item, key));
      out->push_back(id);
    }
    return absl::OkStatus();
  };
}

void DefineTenant(TableReader& r, TenantConfig& c) {
  r.On("uids", IdList(&c.uids));
  r.On("gids", IdList(&c.gids));
  r.On("cert_names", StringList(&c.cert_names));
  r.On("max_registered_bytes", Size(&c.max_registered_bytes));
  r.On("max_inflight_transfers", Integer(&c.max_inflight_transfers));
  r.On("max_priority", String(&c.max_priority));
  r.On("max_bandwidth", Size(&c.max_bandwidth));
  r.On("weight", Integer(&c.weight));
  r.On("admin", Bool(&c.admin));
}

// [tenants]: a table of tables, one per tenant (toml++ keeps them by name).
TableReader::Handler Tenants(std::vector<TenantConfig>* out) {
  return [out](const toml::node& node, const std::string& key) -> absl::Status {
    const toml::table* table = node.as_table();
    if (table == nullptr) return TypeError(key, "a table of tenants, like [tenants.kv]");
    for (const auto& [name, tenant] : *table) {
      TenantConfig config;
      config.name = std::string(name.str());
      const std::string path = absl::StrCat(key, ".", config.name);
      RETURN_IF_ERROR(Table([&](TableReader& r) { DefineTenant(r, config); }, path)(tenant, path));
      out->push_back(std::move(config));
    }
    return absl::OkStatus();
  };
}

void DefineCluster(TableReader& r, ClusterConfig& c) {
  r.On("etcd", StringList(&c.etcd));
  r.On("prefix", String(&c.prefix));
  r.On("lease_ttl", Duration(&c.lease_ttl));
  r.On("ca", String(&c.ca));
  r.On("cert", String(&c.cert));
  r.On("key", String(&c.key));
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
  top.On("priorities", Table([&](TableReader& r) { DefinePriorities(r, config.engine.priorities); },
                             "priorities"));
  top.On("regions", Table([&](TableReader& r) { DefineRegions(r, config.regions); }, "regions"));
  top.On("log", Table([&](TableReader& r) { DefineLog(r, config.log); }, "log"));
  top.On("tls", Table([&](TableReader& r) { DefineTls(r, config.tls); }, "tls"));
  top.On("metrics", Table([&](TableReader& r) { DefineMetrics(r, config.metrics); }, "metrics"));
  top.On("cluster", Table([&](TableReader& r) { DefineCluster(r, config.cluster); }, "cluster"));
  top.On("tenants", Tenants(&config.engine.tenants));
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

}  // namespace xferd
