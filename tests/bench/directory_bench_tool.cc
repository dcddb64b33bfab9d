// directory_bench_tool: the C++ half of tests/bench/directory_bench.py. It
// writes simulated daemons' records into etcd with the daemon's own etcd
// client and record encoding, and times what real daemons do with them.
// Each subcommand prints one JSON line:
//   fill     N node records and R region records per node under a prefix
//            (transactions of 128 puts, etcd's default limit): keys, bytes
//            (keys and values), seconds, the revision after.
//   watch    C times: put one new node record and poll every --target's
//            NodeInfo until its cache revision reaches the put's; the time
//            from before the put until the first and the last target had it,
//            and the put's own round trip (the reference).
//   lookup   FindRegion of a cached name, ListNodes and GetNodeInfo (the
//            reference: a bare unary call), each in a loop of S seconds:
//            latency percentiles, and ListNodes' answer size.
// A program, not a test: it asserts nothing about speed. Exit 1 on an error.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/xferd_client.h"
#include "daemon/cluster/etcd_client.h"
#include "daemon/cluster/records.h"

namespace xferd::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr absl::Duration kEtcdTimeout = absl::Seconds(10);
constexpr int kTxnOps = 128;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(i, values.size() - 1)];
}

std::string Figures(const std::vector<double>& ms) {
  return absl::StrCat("{\"n\":", ms.size(), ",\"p50_ms\":", Percentile(ms, 50),
                      ",\"p99_ms\":", Percentile(ms, 99), ",\"max_ms\":", Percentile(ms, 100), "}");
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "directory_bench_tool: %s\n", status.ToString().c_str());
  return 1;
}

absl::StatusOr<std::unique_ptr<cluster::EtcdClient>> Etcd(const std::string& endpoint) {
  ClusterConfig config;
  config.etcd = {endpoint};
  return cluster::EtcdClient::Create(config);
}

// A record as a daemon would publish it (see directory.cc).
v1::DirectoryNode SimulatedNode(const std::string& id, int i) {
  v1::DirectoryNode node;
  node.set_node_id(id);
  node.set_address(absl::StrCat("10.", (i >> 8) & 255, ".", i & 255, ".1:7300"));
  node.set_transport(v1::TRANSPORT_KIND_VERBS);
  node.set_device("mlx5_0:1");
  node.set_version("0.1.0");
  node.add_identity(id);
  node.set_incarnation(0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1));
  node.set_lease(0x694d8a1b2c3d4e00 + i);
  return node;
}

v1::DirectoryRegion SimulatedRegion(const std::string& id, int r) {
  v1::DirectoryRegion region;
  region.set_node_id(id);
  region.set_name(absl::StrCat("kv-cache-layer-", r));
  region.set_size(uint64_t{1} << 30);
  region.set_backing(v1::REGION_BACKING_SHM);
  region.mutable_access()->set_remote_write(true);
  region.mutable_access()->set_remote_read(true);
  return region;
}

void AddPut(etcdserverpb::TxnRequest& txn, std::string key, std::string value) {
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(std::move(key));
  put->set_value(std::move(value));
}

int Fill(const std::string& endpoint, const std::string& prefix, int nodes, int regions) {
  absl::StatusOr<std::unique_ptr<cluster::EtcdClient>> etcd = Etcd(endpoint);
  if (!etcd.ok()) return Fail(etcd.status());
  uint64_t keys = 0, bytes = 0, node_bytes = 0;
  int64_t revision = 0;
  etcdserverpb::TxnRequest txn;
  auto flush = [&]() -> absl::Status {
    if (txn.success_size() == 0) return absl::OkStatus();
    absl::StatusOr<etcdserverpb::TxnResponse> done = (*etcd)->Txn(txn, kEtcdTimeout);
    if (!done.ok()) return done.status();
    revision = done->header().revision();
    txn.Clear();
    return absl::OkStatus();
  };
  auto put = [&](std::string key, std::string value) -> absl::Status {
    keys += 1;
    bytes += key.size() + value.size();
    AddPut(txn, std::move(key), std::move(value));
    return txn.success_size() >= kTxnOps ? flush() : absl::OkStatus();
  };
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < nodes; ++i) {
    const std::string id = absl::StrCat("sim-", i);
    const std::string key = cluster::NodeKey(prefix, id);
    const std::string value = cluster::Encode(SimulatedNode(id, i));
    node_bytes += key.size() + value.size();
    if (absl::Status s = put(key, value); !s.ok()) return Fail(s);
    for (int r = 0; r < regions; ++r) {
      const v1::DirectoryRegion region = SimulatedRegion(id, r);
      if (absl::Status s =
              put(cluster::RegionKey(prefix, id, region.name()), cluster::Encode(region));
          !s.ok()) {
        return Fail(s);
      }
    }
  }
  if (absl::Status s = flush(); !s.ok()) return Fail(s);
  std::printf(
      "{\"keys\":%llu,\"bytes\":%llu,\"node_record_bytes\":%llu,\"seconds\":%.3f,"
      "\"revision\":%lld}\n",
      static_cast<unsigned long long>(keys), static_cast<unsigned long long>(bytes),
      static_cast<unsigned long long>(node_bytes),
      std::chrono::duration<double>(Clock::now() - start).count(),
      static_cast<long long>(revision));
  return 0;
}

absl::StatusOr<std::vector<std::unique_ptr<client::Client>>> Clients(
    const std::vector<std::string>& targets) {
  std::vector<std::unique_ptr<client::Client>> clients;
  for (const std::string& target : targets) {
    absl::StatusOr<std::unique_ptr<client::Client>> c =
        client::Client::Connect(target, absl::Seconds(10));
    if (!c.ok()) return c.status();
    clients.push_back(*std::move(c));
  }
  return clients;
}

int Watch(const std::string& endpoint, const std::string& prefix,
          const std::vector<std::string>& targets, int count) {
  absl::StatusOr<std::unique_ptr<cluster::EtcdClient>> etcd = Etcd(endpoint);
  if (!etcd.ok()) return Fail(etcd.status());
  absl::StatusOr<std::vector<std::unique_ptr<client::Client>>> clients = Clients(targets);
  if (!clients.ok()) return Fail(clients.status());
  std::vector<double> first_ms, all_ms, put_ms;
  for (int i = 0; i < count; ++i) {
    const std::string id = absl::StrCat("bench-new-", i);
    etcdserverpb::TxnRequest txn;
    AddPut(txn, cluster::NodeKey(prefix, id), cluster::Encode(SimulatedNode(id, 60000 + i)));
    const Clock::time_point start = Clock::now();
    absl::StatusOr<etcdserverpb::TxnResponse> done = (*etcd)->Txn(txn, kEtcdTimeout);
    if (!done.ok()) return Fail(done.status());
    put_ms.push_back(Ms(Clock::now() - start));
    const int64_t revision = done->header().revision();
    std::vector<bool> seen(clients->size(), false);
    size_t left = clients->size();
    while (left > 0) {
      for (size_t c = 0; c < clients->size(); ++c) {
        if (seen[c]) continue;
        absl::StatusOr<v1::NodeInfo> info = (*clients)[c]->GetNodeInfo();
        if (!info.ok()) return Fail(info.status());
        if (info->directory().revision() < revision) continue;
        seen[c] = true;
        const double ms = Ms(Clock::now() - start);
        if (left == clients->size()) first_ms.push_back(ms);
        if (--left == 0) all_ms.push_back(ms);
      }
      if (Ms(Clock::now() - start) > 10000) {
        return Fail(absl::DeadlineExceededError(
            absl::StrCat("a daemon's cache did not reach revision ", revision, " in 10 s")));
      }
    }
  }
  std::printf("{\"targets\":%zu,\"put\":%s,\"first\":%s,\"all\":%s}\n", targets.size(),
              Figures(put_ms).c_str(), Figures(first_ms).c_str(), Figures(all_ms).c_str());
  return 0;
}

// Runs `op` for `seconds`; its latencies in ms.
absl::StatusOr<std::vector<double>> Loop(double seconds, const std::function<absl::Status()>& op) {
  std::vector<double> ms;
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(seconds));
  while (Clock::now() < end) {
    const Clock::time_point start = Clock::now();
    if (absl::Status s = op(); !s.ok()) return s;
    ms.push_back(Ms(Clock::now() - start));
  }
  return ms;
}

int Lookup(const std::string& target, const std::string& region, double seconds) {
  absl::StatusOr<std::vector<std::unique_ptr<client::Client>>> clients = Clients({target});
  if (!clients.ok()) return Fail(clients.status());
  client::Client& c = *(*clients)[0];
  size_t list_bytes = 0, nodes = 0;
  absl::StatusOr<std::vector<double>> info =
      Loop(seconds, [&] { return c.GetNodeInfo().status(); });
  absl::StatusOr<std::vector<double>> find = Loop(seconds, [&]() -> absl::Status {
    absl::StatusOr<v1::FindRegionResponse> found = c.FindRegion(region);
    if (found.ok() && found->regions_size() == 0) {
      return absl::InternalError(absl::StrCat("no region named ", region));
    }
    return found.status();
  });
  absl::StatusOr<std::vector<double>> list = Loop(seconds, [&]() -> absl::Status {
    absl::StatusOr<v1::ListNodesResponse> listed = c.ListNodes();
    if (!listed.ok()) return listed.status();
    list_bytes = listed->ByteSizeLong();
    nodes = listed->nodes_size();
    return absl::OkStatus();
  });
  for (const auto* r : {&info, &find, &list}) {
    if (!r->ok()) return Fail(r->status());
  }
  std::printf(
      "{\"node_info\":%s,\"find_region\":%s,\"list_nodes\":%s,\"list_nodes_bytes\":%zu,"
      "\"list_nodes_nodes\":%zu}\n",
      Figures(*info).c_str(), Figures(*find).c_str(), Figures(*list).c_str(), list_bytes, nodes);
  return 0;
}

}  // namespace
}  // namespace xferd::bench

int main(int argc, char** argv) {
  CLI::App app{"directory_bench_tool: etcd directory figures (see directory_bench.py)"};
  app.require_subcommand(1);
  std::string etcd, prefix = "/xferd/", region;
  std::vector<std::string> targets;
  int nodes = 1000, regions = 10, count = 20;
  double seconds = 2;
  int rc = 0;
  CLI::App* fill = app.add_subcommand("fill", "write simulated daemons' records");
  fill->add_option("--etcd", etcd)->required();
  fill->add_option("--prefix", prefix);
  fill->add_option("--nodes", nodes);
  fill->add_option("--regions", regions, "per node");
  fill->callback([&] { rc = xferd::bench::Fill(etcd, prefix, nodes, regions); });
  CLI::App* watch = app.add_subcommand("watch", "put-to-cache latency");
  watch->add_option("--etcd", etcd)->required();
  watch->add_option("--prefix", prefix);
  watch->add_option("--target", targets)->required();
  watch->add_option("--count", count);
  watch->callback([&] { rc = xferd::bench::Watch(etcd, prefix, targets, count); });
  CLI::App* lookup = app.add_subcommand("lookup", "FindRegion, ListNodes, GetNodeInfo loops");
  lookup->add_option("--target", targets)->required();
  lookup->add_option("--region", region)->required();
  lookup->add_option("--seconds", seconds);
  lookup->callback([&] { rc = xferd::bench::Lookup(targets.at(0), region, seconds); });
  CLI11_PARSE(app, argc, argv);
  return rc;
}
