#include "daemon/common/config.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace xferd {
namespace {

TEST(ConfigTest, EmptyTextGivesDefaults) {
  absl::StatusOr<Config> config = ParseConfig("", "<test>");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->engine.pollers, 2u);
  EXPECT_EQ(config->engine.slice_size, 1u << 20);
  EXPECT_EQ(config->transport.kind, TransportChoice::kAuto);
  EXPECT_TRUE(Validate(*config).ok());
}

TEST(ConfigTest, ParsesEveryTable) {
  absl::StatusOr<Config> config = ParseConfig(R"(
node_id = "host-a"
[server]
listen = "0.0.0.0:7300"
unix_socket = "/tmp/x.sock"
unix_socket_mode = 432
[transport]
kind = "tcp"
tcp_socket_buffer = "8MiB"
tcp_user_timeout = "3s"
verbs_gid_index = 3
[engine]
pollers = 4
slice_size = "256KiB"
spin = "20us"
spin_max = "150us"
poller_slice = "200us"
drain_timeout = "3s"
[regions]
max_registered_bytes = "2GiB"
[log]
level = "debug"
json = true
)",
                                              "<test>");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->node_id, "host-a");
  EXPECT_EQ(config->server.listen, "0.0.0.0:7300");
  EXPECT_EQ(config->server.unix_socket_mode, 0660u);
  EXPECT_EQ(config->transport.kind, TransportChoice::kTcp);
  EXPECT_EQ(config->transport.tcp_socket_buffer, 8u << 20);
  EXPECT_EQ(config->transport.tcp_user_timeout, absl::Seconds(3));
  EXPECT_EQ(config->transport.verbs_gid_index, 3);
  EXPECT_EQ(config->engine.pollers, 4u);
  EXPECT_EQ(config->engine.slice_size, 256u << 10);
  EXPECT_EQ(config->engine.spin, absl::Microseconds(20));
  EXPECT_EQ(config->engine.spin_max, absl::Microseconds(150));
  EXPECT_EQ(config->engine.poller_slice, absl::Microseconds(200));
  EXPECT_EQ(config->engine.drain_timeout, absl::Seconds(3));
  EXPECT_EQ(config->regions.max_registered_bytes, 2ull << 30);
  EXPECT_TRUE(config->log.json);
  EXPECT_TRUE(Validate(*config).ok());
}

TEST(ConfigTest, FileDirsDefaultParseAndMustBeAbsolute) {
  absl::StatusOr<Config> defaults = ParseConfig("", "x");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->regions.file_dirs, std::vector<std::string>{"/var/lib/xferd/data"});
  EXPECT_EQ(defaults->regions.file_mode, 0640u);
  absl::StatusOr<Config> two =
      ParseConfig("[regions]\nfile_dirs = [\"/a\", \"/b/c\"]\nfile_mode = 0o600\n", "x");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->regions.file_dirs, (std::vector<std::string>{"/a", "/b/c"}));
  EXPECT_EQ(two->regions.file_mode, 0600u);
  absl::StatusOr<Config> none = ParseConfig("[regions]\nfile_dirs = []\n", "x");
  ASSERT_TRUE(none.ok() && Validate(*none).ok()) << "no file regions";
  for (const char* bad : {"[\"data\"]", "[\"/\"]", "[\"\"]"}) {
    absl::StatusOr<Config> c = ParseConfig(absl::StrCat("[regions]\nfile_dirs = ", bad), "x");
    ASSERT_TRUE(c.ok()) << c.status();
    const absl::Status s = Validate(*c);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("regions.file_dirs"), absl::string_view::npos) << s;
  }
  absl::StatusOr<Config> mode = ParseConfig("[regions]\nfile_mode = 0o1777\n", "x");
  ASSERT_TRUE(mode.ok()) << mode.status();
  EXPECT_FALSE(Validate(*mode).ok());
}

TEST(ConfigTest, UnknownKeyIsAnErrorNamingIt) {
  absl::StatusOr<Config> config = ParseConfig("[engine]\npolers = 3\n", "x.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("engine.polers"), absl::string_view::npos);
  EXPECT_NE(config.status().message().find("pollers"), absl::string_view::npos);
}

// A key older configs have says why it is gone and what to do.
TEST(ConfigTest, TheRemovedShmDirSaysWhy) {
  absl::StatusOr<Config> config = ParseConfig("[regions]\nshm_dir = \"/dev/shm\"\n", "x.toml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("regions.shm_dir' is gone"), absl::string_view::npos)
      << config.status();
  EXPECT_NE(config.status().message().find("delete the key"), absl::string_view::npos);
}

TEST(ConfigTest, WrongTypesAndSyntaxAreErrors) {
  EXPECT_FALSE(ParseConfig("[engine]\npollers = \"two\"\n", "x").ok());
  EXPECT_FALSE(ParseConfig("[engine]\nslice_size = \"big\"\n", "x").ok());
  EXPECT_FALSE(ParseConfig("[engine]\nspin = 5\n", "x").ok());
  EXPECT_FALSE(ParseConfig("[engine]\npollers = -1\n", "x").ok());
  // Floats are not integers, even out of int64's range (found by fuzzing).
  absl::StatusOr<Config> huge = ParseConfig("[engine]\nhistory = 1e25\n", "x");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().message(), "x: config key 'engine.history' must be an integer");
  EXPECT_FALSE(ParseConfig("[engine]\nslice_size = 6.5e4\n", "x").ok());
  EXPECT_FALSE(ParseConfig("server = 3\n", "x").ok());
  EXPECT_FALSE(ParseConfig("[transport]\nkind = \"rdma\"\n", "x").ok());
  absl::StatusOr<Config> broken = ParseConfig("[engine\n", "bad.toml");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("bad.toml:1"), absl::string_view::npos);
}

// Several RDMA devices: a list or "all"; not together with verbs_device.
TEST(ConfigTest, VerbsDevicesTakeAListOrAll) {
  absl::StatusOr<Config> list = ParseConfig(
      "[transport]\nverbs_devices = [\"rxe0\", \"rxe1\"]\nverbs_pairing = \"rail\"\n", "x");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->transport.verbs_devices, (std::vector<std::string>{"rxe0", "rxe1"}));
  EXPECT_EQ(list->transport.verbs_pairing, "rail");
  EXPECT_TRUE(Validate(*list).ok());
  absl::StatusOr<Config> all = ParseConfig("[transport]\nverbs_devices = \"all\"\n", "x");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->transport.verbs_devices, (std::vector<std::string>{"all"}));
  absl::StatusOr<Config> some = ParseConfig("[transport]\nverbs_devices = \"rxe0\"\n", "x");
  ASSERT_FALSE(some.ok());
  EXPECT_NE(some.status().message().find("array of device names"), std::string::npos);
  Config both;
  both.transport.verbs_device = "rxe0";
  both.transport.verbs_devices = {"rxe1"};
  EXPECT_NE(Validate(both).message().find("verbs_device"), std::string::npos);
  Config pairing;
  pairing.transport.verbs_pairing = "bond";
  EXPECT_FALSE(Validate(pairing).ok());
  absl::StatusOr<Config> pinning = ParseConfig("[transport]\nnuma_pinning = \"off\"\n", "x");
  ASSERT_TRUE(pinning.ok()) << pinning.status();
  EXPECT_EQ(pinning->transport.numa_pinning, "off");
  EXPECT_EQ(Config().transport.numa_pinning, "auto");
  // Memory windows are on unless turned off.
  EXPECT_TRUE(Config().transport.verbs_memory_windows);
  absl::StatusOr<Config> windows =
      ParseConfig("[transport]\nverbs_memory_windows = false\n", "x");
  ASSERT_TRUE(windows.ok()) << windows.status();
  EXPECT_FALSE(windows->transport.verbs_memory_windows);
  pinning->transport.numa_pinning = "node0";
  EXPECT_EQ(Validate(*pinning).message(),
            "config key 'transport.numa_pinning' must be \"auto\" or \"off\"");
}

// Signed keys take negative values; unsigned ones and out-of-range ones do not.
TEST(ConfigTest, IntegersAreCheckedAgainstTheirKeysType) {
  absl::StatusOr<Config> automatic = ParseConfig("[transport]\nverbs_gid_index = -1\n", "x");
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ(automatic->transport.verbs_gid_index, -1);
  EXPECT_FALSE(ParseConfig("[transport]\nverbs_gid_index = -2147483649\n", "x").ok());
  EXPECT_FALSE(ParseConfig("[transport]\nverbs_gid_index = 2147483648\n", "x").ok());
  EXPECT_FALSE(ParseConfig("[engine]\npollers = -1\n", "x").ok());
  EXPECT_FALSE(ParseConfig("[engine]\npollers = 4294967296\n", "x").ok());
  absl::StatusOr<Config> most = ParseConfig("[engine]\nhistory = 4294967295\n", "x");
  ASSERT_TRUE(most.ok()) << most.status();
}

TEST(ConfigTest, ValidateRejectsOutOfRangeValues) {
  Config config;
  config.engine.pollers = 0;
  EXPECT_FALSE(Validate(config).ok());
  config = Config();
  config.engine.slice_size = 100;
  EXPECT_NE(Validate(config).message().find("engine.slice_size"), absl::string_view::npos);
  config = Config();
  config.transport.verbs_mtu = 1500;
  EXPECT_FALSE(Validate(config).ok());
  config = Config();
  config.transport.require_rdma = true;
  config.transport.kind = TransportChoice::kTcp;
  EXPECT_FALSE(Validate(config).ok());
  config = Config();
  config.server.listen.clear();
  config.server.unix_socket.clear();
  EXPECT_FALSE(Validate(config).ok());
  config = Config();
  config.log.level = "verbose";
  EXPECT_FALSE(Validate(config).ok());
  config = Config();
  config.transport.tcp_user_timeout = absl::Milliseconds(10);
  EXPECT_NE(Validate(config).message().find("transport.tcp_user_timeout"), absl::string_view::npos);
  config = Config();
  config.engine.spin_max = absl::Seconds(2);
  EXPECT_NE(Validate(config).message().find("engine.spin_max"), absl::string_view::npos);
  config = Config();
  EXPECT_EQ(config.engine.poller_slice, absl::ZeroDuration());  // the kernel's
  for (absl::Duration outside : {absl::Microseconds(50), absl::Milliseconds(101)}) {
    config.engine.poller_slice = outside;
    EXPECT_NE(Validate(config).message().find("engine.poller_slice"), absl::string_view::npos);
  }
  config.engine.poller_slice = absl::Milliseconds(100);
  EXPECT_TRUE(Validate(config).ok());
}

TEST(ConfigTest, ParsesAndChecksPriorities) {
  absl::StatusOr<Config> c = ParseConfig(R"(
[priorities]
normal_weight = 6
bulk_weight = 3
background_weight = 2
lane_bytes = "1MiB"
critical_reserve = 16
)",
                                         "test");
  ASSERT_TRUE(c.ok()) << c.status();
  const PriorityConfig& p = c->engine.priorities;
  EXPECT_EQ(p.normal_weight, 6u);
  EXPECT_EQ(p.bulk_weight, 3u);
  EXPECT_EQ(p.background_weight, 2u);
  EXPECT_EQ(p.lane_bytes, 1u << 20);
  EXPECT_EQ(p.critical_reserve, 16u);
  EXPECT_TRUE(Validate(*c).ok());
  Config config;
  config.engine.priorities.bulk_weight = 0;
  EXPECT_EQ(Validate(config).message(),
            "config key 'priorities.bulk_weight' must be between 1 and 1000 (a weight of 0 would "
            "starve the class)");
  config = Config();
  config.engine.priorities.lane_bytes = 100;
  EXPECT_NE(Validate(config).message().find("priorities.lane_bytes"), absl::string_view::npos);
  config = Config();
  config.engine.max_inflight_transfers = 32;
  EXPECT_EQ(Validate(config).message(),
            "config key 'priorities.critical_reserve' is 64 (default 64): it must be below "
            "engine.max_inflight_transfers (32), whose rest the other classes use");
}

TEST(ConfigTest, ParsesAndChecksTenants) {
  absl::StatusOr<Config> c = ParseConfig(R"(
[tenants.kv]
uids = [1001, 1002]
gids = [2000]
cert_names = ["kv.example"]
max_registered_bytes = "8GiB"
max_inflight_transfers = 64
max_priority = "normal"
max_bandwidth = "100MiB"
weight = 3
[tenants.default]
max_priority = "bulk"
)",
                                         "test");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->engine.tenants.size(), 2u);
  const TenantConfig& kv = c->engine.tenants[1];  // by name: default, kv
  EXPECT_EQ(kv.name, "kv");
  EXPECT_EQ(kv.uids, (std::vector<uint32_t>{1001, 1002}));
  EXPECT_EQ(kv.gids, (std::vector<uint32_t>{2000}));
  EXPECT_EQ(kv.cert_names, (std::vector<std::string>{"kv.example"}));
  EXPECT_EQ(kv.max_registered_bytes, 8ull << 30);
  EXPECT_EQ(kv.max_inflight_transfers, 64u);
  EXPECT_EQ(kv.max_priority, "normal");
  EXPECT_EQ(kv.max_bandwidth, 100ull << 20);
  EXPECT_EQ(kv.weight, 3u);
  EXPECT_TRUE(Validate(*c).ok());

  const auto invalid = [](const char* toml) {
    absl::StatusOr<Config> parsed = ParseConfig(toml, "test");
    return parsed.ok() ? std::string(Validate(*parsed).message())
                       : std::string(parsed.status().message());
  };
  EXPECT_EQ(invalid("[tenants.a]\nuids = [7]\n[tenants.b]\nuids = [7]\n"),
            "config key 'tenants.b' claims uid 7, which tenants.a claims too: a client must have "
            "one tenant");
  EXPECT_EQ(invalid("[tenants.a]\nmax_priority = \"urgent\"\n"),
            "config key 'tenants.a.max_priority' must be \"critical\", \"normal\", \"bulk\" or "
            "\"background\"");
  EXPECT_EQ(invalid("[tenants.default]\nuids = [7]\n"),
            "config key 'tenants.default' is whoever matches no other tenant: it takes no uids, "
            "gids or cert_names (give those to a tenant of their own)");
  EXPECT_EQ(invalid("[tenants.\"a b\"]\n"),
            "config key 'tenants.a b' must be named with 1 to 64 letters, digits, '_' or '-'");
  EXPECT_EQ(invalid("[tenants.a]\nuids = [-1]\n"),
            "test: config key 'tenants.a.uids' is out of range");
  EXPECT_EQ(invalid("[tenants.a]\nquota = 1\n"),
            "test: unknown config key 'tenants.a.quota'; known keys here: admin, cert_names, "
            "gids, max_bandwidth, max_inflight_transfers, max_priority, max_registered_bytes, "
            "uids, weight");
  EXPECT_EQ(invalid("[tenants.default]\nadmin = true\n"),
            "config key 'tenants.default.admin' cannot be true: the default tenant is whoever is "
            "not identified (give operators a tenant of their own, by uid, gid or certificate)");
  EXPECT_EQ(invalid("[tenants.a]\nweight = 0\n"),
            "config key 'tenants.a.weight' must be between 1 and 1000 (a weight of 0 would "
            "starve the tenant)");
  EXPECT_EQ(invalid("[tenants.a]\nmax_bandwidth = \"1KiB\"\n"),
            "config key 'tenants.a.max_bandwidth' must be 0 (no cap) or at least 64KiB (bytes "
            "per second)");
}

TEST(ConfigTest, ParsesTls) {
  absl::StatusOr<Config> config = ParseConfig(R"(
[tls]
cert = "/etc/xferd/node.pem"
key = "/etc/xferd/node.key"
ca = "/etc/xferd/ca.pem"
client_ca = "/etc/xferd/clients.pem"
allowed_clients = ["ops", "backup"]
)",
                                              "<test>");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->tls.cert, "/etc/xferd/node.pem");
  EXPECT_EQ(config->tls.client_ca, "/etc/xferd/clients.pem");
  EXPECT_EQ(config->tls.allowed_clients, (std::vector<std::string>{"ops", "backup"}));
  EXPECT_TRUE(config->tls.enabled());
  EXPECT_FALSE(Config().tls.enabled());
  EXPECT_FALSE(ParseConfig("[tls]\nallowed_clients = \"ops\"\n", "x").ok());
  EXPECT_FALSE(ParseConfig("[tls]\nallowed_clients = [1]\n", "x").ok());
}

TEST(ConfigTest, ValidateTlsNeedsAllThreeReadableFiles) {
  Config config;
  config.tls.cert = "/proc/self/status";  // readable by anyone
  absl::Status s = Validate(config);
  EXPECT_NE(s.message().find("'tls.key' is not set"), absl::string_view::npos) << s;
  config.tls.key = "/proc/self/status";
  config.tls.ca = "/nonexistent/ca.pem";
  s = Validate(config);
  EXPECT_NE(s.message().find("'tls.ca' names /nonexistent/ca.pem, which cannot be read"),
            absl::string_view::npos)
      << s;
  config.tls.ca = "/proc/self/status";
  EXPECT_TRUE(Validate(config).ok());
  config.tls.client_ca = "/nonexistent/clients.pem";
  EXPECT_NE(Validate(config).message().find("tls.client_ca"), absl::string_view::npos);
  config = Config();
  config.tls.allowed_clients = {"ops"};  // without certificates
  EXPECT_NE(Validate(config).message().find("tls.cert"), absl::string_view::npos);
}

TEST(ConfigTest, TcpEncryptionFollowsTlsUnlessSetAndNeedsIt) {
  absl::StatusOr<Config> config = ParseConfig("", "<string>");
  ASSERT_TRUE(config.ok());
  EXPECT_FALSE(TcpEncrypted(*config));  // no [tls]: nothing to encrypt with
  config->tls.cert = config->tls.key = config->tls.ca = "/proc/self/status";
  EXPECT_TRUE(TcpEncrypted(*config));  // [tls]: on by default
  config = ParseConfig("[transport]\ntcp_encryption = \"off\"\n", "<string>");
  ASSERT_TRUE(config.ok()) << config.status();
  config->tls.cert = config->tls.key = config->tls.ca = "/proc/self/status";
  EXPECT_FALSE(TcpEncrypted(*config));
  EXPECT_TRUE(Validate(*config).ok());
  config = ParseConfig("[transport]\ntcp_encryption = \"tls\"\n", "<string>");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::Status s = Validate(*config);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'transport.tcp_encryption' is \"tls\" but [tls] is not configured"),
            absl::string_view::npos)
      << s;
  config->transport.tcp_encryption = "aes";
  EXPECT_NE(Validate(*config).message().find("must be \"tls\" or \"off\""),
            absl::string_view::npos);
}

TEST(ConfigTest, TcpKernelTlsIsAutoByDefaultAndChecked) {
  absl::StatusOr<Config> config = ParseConfig("", "<string>");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->transport.tcp_kernel_tls, "auto");
  for (const char* value : {"send", "off"}) {
    config = ParseConfig(absl::StrCat("[transport]\ntcp_kernel_tls = \"", value, "\"\n"),
                         "<string>");
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->transport.tcp_kernel_tls, value);
    EXPECT_TRUE(Validate(*config).ok());
  }
  config->transport.tcp_kernel_tls = "receive";
  EXPECT_NE(Validate(*config).message().find(
                "'transport.tcp_kernel_tls' must be \"auto\", \"send\" or \"off\""),
            absl::string_view::npos)
      << Validate(*config);
}

TEST(ConfigTest, MissingFileIsNotFound) {
  EXPECT_EQ(LoadConfigFile("/nonexistent/xferd.toml").status().code(), absl::StatusCode::kNotFound);
}

TEST(ConfigTest, MetricsEndpointIsOffByDefaultAndChecked) {
  EXPECT_EQ(ParseConfig("", "<test>")->metrics.listen, "");
  absl::StatusOr<Config> on = ParseConfig("[metrics]\nlisten = \"127.0.0.1:9300\"\n", "<test>");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(on->metrics.listen, "127.0.0.1:9300");
  EXPECT_TRUE(Validate(*on).ok());
  absl::Status typo = ParseConfig("[metrics]\nport = 9300\n", "<test>").status();
  EXPECT_NE(typo.message().find("unknown config key 'metrics.port'"), absl::string_view::npos)
      << typo;
  for (const char* address : {"9300", "127.0.0.1:99999", "[::1]9300"}) {
    on->metrics.listen = address;
    absl::Status bad = Validate(*on);
    EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_NE(bad.message().find("metrics.listen"), absl::string_view::npos) << bad;
  }
}

TEST(ConfigTest, MetricsHttpsKeysGoTogether) {
  absl::StatusOr<Config> https = ParseConfig(
      "[metrics]\nlisten = \"127.0.0.1:9300\"\ntls_cert = \"/proc/self/status\"\n"
      "tls_key = \"/proc/self/status\"\ntls_client_ca = \"/proc/self/status\"\n",
      "<test>");
  ASSERT_TRUE(https.ok()) << https.status();
  EXPECT_EQ(https->metrics.tls_cert, "/proc/self/status");
  EXPECT_EQ(https->metrics.tls_key, "/proc/self/status");
  EXPECT_EQ(https->metrics.tls_client_ca, "/proc/self/status");
  EXPECT_TRUE(Validate(*https).ok());  // readable; their contents: LoadScrapeSecurity
  const auto error = [&](void (*change)(MetricsConfig&)) {
    Config c = *https;
    change(c.metrics);
    return std::string(Validate(c).message());
  };
  EXPECT_TRUE(absl::StrContains(error([](MetricsConfig& m) { m.tls_key.clear(); }),
                                "'metrics.tls_key' is not set"));
  EXPECT_TRUE(absl::StrContains(error([](MetricsConfig& m) { m.tls_cert.clear(); }),
                                "'metrics.tls_cert' is not set"));
  EXPECT_TRUE(absl::StrContains(error([](MetricsConfig& m) {
                                  m.tls_cert.clear();
                                  m.tls_key.clear();
                                }),
                                "'metrics.tls_client_ca' needs HTTPS"));
  EXPECT_TRUE(absl::StrContains(error([](MetricsConfig& m) { m.tls_client_ca = "/nonexistent"; }),
                                "'metrics.tls_client_ca' names /nonexistent"));
}

TEST(ConfigTest, ClusterIsOffByDefault) {
  absl::StatusOr<Config> config = ParseConfig("", "<test>");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->cluster.enabled());
  EXPECT_EQ(config->cluster.prefix, "/xferd/");
  EXPECT_EQ(config->cluster.lease_ttl, absl::Seconds(10));
}

TEST(ConfigTest, ParsesAndChecksCluster) {
  absl::StatusOr<Config> config = ParseConfig(R"(
[cluster]
etcd = ["10.0.0.5:2379", "etcd-2.example:2379"]
prefix = "/tenant-a/xferd/"
lease_ttl = "5s"
ca = "/proc/self/status"
)",
                                              "<test>");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->cluster.enabled());
  EXPECT_EQ(config->cluster.etcd,
            (std::vector<std::string>{"10.0.0.5:2379", "etcd-2.example:2379"}));
  EXPECT_EQ(config->cluster.prefix, "/tenant-a/xferd/");
  EXPECT_EQ(config->cluster.lease_ttl, absl::Seconds(5));
  EXPECT_TRUE(Validate(*config).ok()) << Validate(*config);

  const auto expect_bad = [](const Config& bad, absl::string_view key, absl::string_view what) {
    absl::Status s = Validate(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_NE(s.message().find(absl::StrCat("'", key, "'")), absl::string_view::npos) << s;
    EXPECT_NE(s.message().find(what), absl::string_view::npos) << s;
  };
  Config bad = *config;
  bad.cluster.etcd = {"10.0.0.5"};
  expect_bad(bad, "cluster.etcd", "has '10.0.0.5': each endpoint must be host:port");
  bad = *config;
  bad.cluster.prefix = "xferd";
  expect_bad(bad, "cluster.prefix", "must start and end with '/'");
  bad = *config;
  bad.cluster.lease_ttl = absl::Seconds(1);
  expect_bad(bad, "cluster.lease_ttl", "between 2s and 1h");
  bad = *config;
  bad.cluster.cert = "/proc/self/status";
  expect_bad(bad, "cluster.key", "cluster.cert and cluster.key together");
  bad.cluster.key = "/nonexistent/k.pem";
  expect_bad(bad, "cluster.key", "names /nonexistent/k.pem, which cannot be read");
  bad = Config();
  bad.cluster.ca = "/proc/self/status";  // TLS files without endpoints
  expect_bad(bad, "cluster.etcd", "is empty but cluster TLS files are set");
  absl::Status typo = ParseConfig("[cluster]\nendpoints = [\"a:1\"]\n", "<test>").status();
  EXPECT_NE(typo.message().find("unknown config key 'cluster.endpoints'"), absl::string_view::npos)
      << typo;
}

}  // namespace
}  // namespace xferd
