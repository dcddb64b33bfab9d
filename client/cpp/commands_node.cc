// xferctl info, stats, devices and nodes: what the daemon is, what it has
// done, the RDMA hardware it sees and the cluster directory it is in.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/commands.h"
#include "client/cpp/format.h"
#include "daemon/base/units.h"

namespace xferd::client {
namespace {

using Rows = std::vector<std::pair<std::string, std::string>>;

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

std::string DirectoryText(const v1::DirectoryStatus& d) {
  if (!d.enabled()) return "none (no [cluster] section)";
  return absl::StrCat(d.connected() ? "connected" : "disconnected", " to etcd ", d.etcd(),
                      ", prefix ", d.prefix(), ", cache at revision ", d.revision(), " (watch ",
                      d.watching() ? "open" : "closed", ")",
                      d.error().empty() ? "" : ": " + d.error());
}

std::string NodeInfoText(const v1::NodeInfo& info) {
  std::string transport = TransportLabel(info.transport());
  if (!info.transport_reason().empty())
    absl::StrAppend(&transport, " (", info.transport_reason(), ")");
  return KeyValues(Rows{
      {"node", info.node_id()},
      {"version", info.version()},
      {"transport", transport},
      {"device", OrDash(info.device())},
      {"grpc address", OrDash(info.grpc_address())},
      {"unix socket", OrDash(info.unix_socket())},
      {"pollers", absl::StrCat(info.pollers())},
      {"slice size", FormatBytes(info.default_slice_size())},
      {"started", FormatTimestamp(info.started_at())},
      {"pid", absl::StrCat(info.pid())},
      {"security", OrDash(info.security())},
      {"directory", DirectoryText(info.directory())},
      {"your tenant", OrDash(info.tenant())},
  });
}

std::string StatsText(const v1::Stats& s) {
  const absl::Duration uptime = ToDuration(s.uptime());
  Rows rows = {
      {"uptime", FormatElapsed(uptime)},
      {"transport", TransportLabel(s.transport())},
      {"transfers",
       absl::StrCat(s.transfers_submitted(), " submitted, ", s.transfers_done(), " done, ",
                    s.transfers_failed(), " failed, ", s.transfers_cancelled(), " cancelled, ",
                    s.transfers_in_flight(), " in flight")},
      {"bytes sent", FormatBytes(s.bytes_sent())},
      {"bytes received", FormatBytes(s.bytes_received())},
      {"landed events", absl::StrCat(s.landed_events())},
      {"regions", absl::StrCat(s.regions(), " (", FormatBytes(s.registered_bytes()), ")")},
      {"peers", absl::StrCat(s.peers(), " (", s.lanes(), " lanes)")},
      {"pollers", absl::StrCat(s.pollers())},
      {"rejected writes", absl::StrCat(s.rejected_writes())},
  };
  // Sorted by code name: the maps' own order is unspecified.
  for (const auto& [label, counts] : {std::pair{"errors ", &s.errors()},
                                      std::pair{"refused ", &s.refused()}}) {
    std::vector<std::pair<std::string, uint64_t>> sorted(counts->begin(), counts->end());
    std::sort(sorted.begin(), sorted.end());
    for (const auto& [code, count] : sorted) rows.push_back({label + code, absl::StrCat(count)});
  }
  // By class, those that ran any (docs/priorities.md).
  for (const v1::PriorityStats& p : s.priorities()) {
    if (p.submitted() == 0 && p.refused() == 0) continue;
    rows.push_back(
        {"priority " + PriorityLabel(p.priority()),
         absl::StrCat(p.submitted(), " submitted, ", p.done(), " done, ", p.failed(), " failed, ",
                      p.cancelled(), " cancelled, ", p.refused(), " refused, ", p.in_flight(),
                      " in flight, ", FormatBytes(p.bytes()), ", mean queue wait ",
                      FormatElapsed(ToDuration(p.mean_queue_wait())))});
  }
  rows.push_back({"open lanes", absl::StrCat(s.open_lanes())});
  rows.push_back({"memory registrations", absl::StrCat(s.memory_registrations())});
  // Verbs striping: what each device carried.
  for (const v1::DeviceStats& d : s.devices()) {
    rows.push_back(
        {"device " + d.name(),
         absl::StrCat(d.up() ? "up" : "DOWN", ", ", FormatBytes(d.bytes_sent()), " sent, ",
                      FormatBytes(d.bytes_received()), " received, ", d.failovers(), " failovers, ",
                      d.rejoins(), " rejoins, ", d.memory_windows(), " memory windows of ",
                      d.max_memory_windows())});
  }
  rows.push_back({"resident memory", FormatBytes(s.resident_bytes())});
  rows.push_back({"open fds", absl::StrCat(s.open_fds())});
  rows.push_back({"threads", absl::StrCat(s.threads())});
  return KeyValues(rows);
}

// One row per GID, as ibv_devinfo -v shows them; '*' marks what the daemon
// uses.
std::string DevicesText(const v1::ListDevicesResponse& r) {
  if (r.devices().empty()) return "no RDMA devices on this host (the daemon uses tcp)\n";
  Table table({{"DEVICE"},
               {"GUID"},
               {"PORT", true},
               {"STATE"},
               {"LINK"},
               {"MTU", true},
               {"LID", true},
               {"GID", true},
               {"ADDRESS"},
               {"TYPE"},
               {"NETDEV"},
               {"USED"}});
  for (const v1::RdmaDevice& d : r.devices()) {
    if (!d.error().empty()) table.AddRow({d.name(), d.node_guid(), "", "error: " + d.error()});
    for (const v1::RdmaPort& p : d.ports()) {
      std::vector<std::string> port = {d.name(),
                                       d.node_guid(),
                                       absl::StrCat(p.number()),
                                       p.state(),
                                       p.link_layer(),
                                       absl::StrCat(p.active_mtu()),
                                       absl::StrCat(p.lid())};
      if (p.gids().empty()) table.AddRow(port);
      for (const v1::RdmaGid& g : p.gids()) {
        std::vector<std::string> row = port;
        row.insert(row.end(), {absl::StrCat(g.index()), g.gid(), g.type(), OrDash(g.netdev()),
                               g.in_use() ? "*" : ""});
        table.AddRow(std::move(row));
      }
    }
  }
  std::string text = table.Render();
  // The devices the daemon drives: where its bytes went, and their NUMA nodes.
  Table driven({{"DEVICE"},
                {"PORT", true},
                {"STATE"},
                {"NUMA", true},
                {"POLLER CPUS"},
                {"RATE"},
                {"SENT", true},
                {"RECEIVED", true},
                {"FAILOVERS", true},
                {"REJOINS", true},
                {"WINDOWS", true}});
  bool any = false;
  for (const v1::RdmaDevice& d : r.devices()) {
    if (!d.in_use()) continue;
    any = true;
    const v1::DeviceStats& s = d.stats();
    driven.AddRow({d.name(), absl::StrCat(s.port()), s.up() ? "up" : "DOWN",
                   s.numa_node() < 0 ? "-" : absl::StrCat(s.numa_node()),
                   s.poller_cpus().empty() ? "-" : absl::StrJoin(s.poller_cpus(), ","),
                   s.rate_mbps() == 0 ? "-" : absl::StrCat(s.rate_mbps() / 1000.0, " Gb/s"),
                   FormatBytes(s.bytes_sent()), FormatBytes(s.bytes_received()),
                   absl::StrCat(s.failovers()), absl::StrCat(s.rejoins()),
                   absl::StrCat(s.memory_windows(), "/", s.max_memory_windows())});
  }
  if (any) absl::StrAppend(&text, "\nin use:\n", driven.Render());
  return text;
}

// One row per tenant: its limits ("-": none of its own), what it uses now,
// its transfers' mean wait for their first op, and its refusals
// (docs/tenants.md).
std::string TenantsText(const v1::Stats& s) {
  Table table({{"TENANT"},
               {"REGIONS", true},
               {"MAX REGIONS", true},
               {"IN FLIGHT", true},
               {"MAX IN FLIGHT", true},
               {"MAX PRIORITY"},
               {"MAX BANDWIDTH", true},
               {"WEIGHT", true},
               {"SUBMITTED", true},
               {"BYTES", true},
               {"MEAN WAIT", true},
               {"REFUSED QUOTA", true},
               {"REFUSED ACCESS", true}});
  for (const v1::TenantStats& t : s.tenants()) {
    table.AddRow({t.admin() ? t.name() + " (admin)" : t.name(), FormatBytes(t.registered_bytes()),
                  t.max_registered_bytes() == 0 ? "-" : FormatBytes(t.max_registered_bytes()),
                  absl::StrCat(t.transfers_in_flight()),
                  t.max_inflight_transfers() == 0 ? "-" : absl::StrCat(t.max_inflight_transfers()),
                  PriorityLabel(t.max_priority()),
                  t.max_bandwidth() == 0 ? "-" : FormatBytes(t.max_bandwidth()) + "/s",
                  absl::StrCat(t.weight()), absl::StrCat(t.transfers_submitted()),
                  FormatBytes(t.bytes()),
                  t.transfers_started() == 0 ? "-" : FormatElapsed(ToDuration(t.mean_queue_wait())),
                  absl::StrCat(t.refused_quota()), absl::StrCat(t.refused_access())});
  }
  return table.Render();
}

// One row per live daemon: its regions by name.
std::string NodesText(const v1::ListNodesResponse& r) {
  if (r.nodes().empty()) return "no live daemons in the directory\n";
  Table table({{"NODE"}, {"ADDRESS"}, {"TRANSPORT"}, {"STATE"}, {"REGIONS"}});
  for (const v1::ClusterNode& n : r.nodes()) {
    std::string transport = TransportLabel(n.node().transport());
    if (!n.node().device().empty()) absl::StrAppend(&transport, " ", n.node().device());
    std::vector<std::string> regions;
    for (const v1::DirectoryRegion& region : n.regions()) {
      regions.push_back(absl::StrCat(region.name(), " (", FormatBytes(region.size()), ")"));
    }
    table.AddRow({n.node().node_id(), n.node().address(), transport, n.state(),
                  regions.empty() ? "-" : absl::StrJoin(regions, ", ")});
  }
  return table.Render();
}

}  // namespace

void AddNodeCommands(CLI::App& app, Action* action) {
  AddCommand(app, "info", "the daemon's node id, transport, addresses and settings", action,
             [](Client& client, const GlobalOptions& global) {
               return EmitResult(global, client.GetNodeInfo(), NodeInfoText);
             });
  AddCommand(app, "stats", "counters: transfers, bytes, regions, peers, errors, resources", action,
             [](Client& client, const GlobalOptions& global) {
               return EmitResult(global, client.GetStats(), StatsText);
             });
  AddCommand(app, "tenants", "tenants with their limits, use and refusals ([tenants.<name>])",
             action, [](Client& client, const GlobalOptions& global) {
               return EmitResult(global, client.GetStats(), TenantsText);
             });
  AddCommand(app, "devices", "RDMA devices, ports, MTUs and GIDs, and which the daemon uses",
             action, [](Client& client, const GlobalOptions& global) {
               return EmitResult(global, client.ListDevices(), DevicesText);
             });
  AddCommand(app, "nodes", "the live daemons of the cluster directory (etcd) and their regions",
             action, [](Client& client, const GlobalOptions& global) {
               return EmitResult(global, client.ListNodes(), NodesText);
             });
}

}  // namespace xferd::client
