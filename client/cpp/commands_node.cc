// xferctl info, xferctl stats: what the daemon is and what it has done.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cpp/commands.h"
#include "client/cpp/format.h"
#include "daemon/common/units.h"

namespace xferd::client {
namespace {

using Rows = std::vector<std::pair<std::string, std::string>>;

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

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
  });
}

std::string StatsText(const v1::Stats& s) {
  const absl::Duration uptime =
      absl::Seconds(s.uptime().seconds()) + absl::Nanoseconds(s.uptime().nanos());
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
  // Sorted by code name: the map's own order is unspecified.
  std::vector<std::pair<std::string, uint64_t>> errors(s.errors().begin(), s.errors().end());
  std::sort(errors.begin(), errors.end());
  for (const auto& [code, count] : errors) rows.push_back({"errors " + code, absl::StrCat(count)});
  rows.push_back({"resident memory", FormatBytes(s.resident_bytes())});
  rows.push_back({"open fds", absl::StrCat(s.open_fds())});
  rows.push_back({"threads", absl::StrCat(s.threads())});
  return KeyValues(rows);
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
}

}  // namespace xferd::client
