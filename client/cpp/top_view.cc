#include "client/cpp/top_view.h"

#include <google/protobuf/struct.pb.h>

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"
#include "client/cpp/format.h"
#include "client/cpp/progress_bar.h"

namespace xferd::client {
namespace {

constexpr int kBarWidth = 20;

absl::Duration Uptime(const v1::Stats& stats) { return ToDuration(stats.uptime()); }

// Bytes per second between two readings of a counter; -1 when unknown.
double PerSecond(uint64_t now, uint64_t before, double seconds) {
  if (seconds <= 0 || now < before) return -1;
  return static_cast<double>(now - before) / seconds;
}

std::string Rate(double bytes_per_second) {
  return bytes_per_second < 0 ? "-" : FormatRate(bytes_per_second);
}

// " (+N)" since the previous refresh, or "" on the first.
std::string Delta(uint64_t now, uint64_t before, bool known) {
  return known && now >= before ? absl::StrCat(" (+", now - before, ")") : "";
}

const v1::Peer* FindPeer(const TopSample* sample, const std::string& node_id) {
  if (sample == nullptr) return nullptr;
  for (const v1::Peer& p : sample->peers.peers()) {
    if (p.node_id() == node_id) return &p;
  }
  return nullptr;
}

const v1::Transfer* FindTransfer(const TopSample* sample, uint64_t id) {
  if (sample == nullptr) return nullptr;
  for (const v1::Transfer& t : sample->transfers.transfers()) {
    if (t.id() == id) return &t;
  }
  return nullptr;
}

std::pair<double, double> PeerRates(const v1::Peer& p, const TopSample* previous, double seconds) {
  const v1::Peer* before = FindPeer(previous, p.node_id());
  if (before == nullptr) return {-1, -1};
  return {PerSecond(p.bytes_sent(), before->bytes_sent(), seconds),
          PerSecond(p.bytes_received(), before->bytes_received(), seconds)};
}

double TransferRate(const v1::Transfer& t, const TopSample* previous, double seconds) {
  const v1::Transfer* before = FindTransfer(previous, t.id());
  return before == nullptr ? -1 : PerSecond(t.bytes_done(), before->bytes_done(), seconds);
}

std::string ErrorsText(const v1::Stats& now, const v1::Stats* before) {
  std::vector<std::pair<std::string, uint64_t>> errors(now.errors().begin(), now.errors().end());
  if (errors.empty()) return "none";
  std::sort(errors.begin(), errors.end());
  std::vector<std::string> parts;
  for (const auto& [code, count] : errors) {
    uint64_t earlier = 0;
    if (before != nullptr) {
      auto it = before->errors().find(code);
      if (it != before->errors().end()) earlier = it->second;
    }
    parts.push_back(absl::StrCat(code, " ", count, Delta(count, earlier, before != nullptr)));
  }
  return absl::StrJoin(parts, ", ");
}

// The classes that ran anything: "critical 2 in flight, 40 done (+5), wait
// 310us; bulk ...", the wait being the mean from submission to a lane.
std::string ClassesText(const v1::Stats& now, const v1::Stats* before) {
  std::vector<std::string> parts;
  for (const v1::PriorityStats& p : now.priorities()) {
    if (p.submitted() == 0 && p.refused() == 0) continue;
    uint64_t done_before = 0;
    if (before != nullptr) {
      for (const v1::PriorityStats& q : before->priorities()) {
        if (q.priority() == p.priority()) done_before = q.done();
      }
    }
    parts.push_back(absl::StrCat(PriorityLabel(p.priority()), " ", p.in_flight(), " in flight, ",
                                 p.done(), " done", Delta(p.done(), done_before, before != nullptr),
                                 p.refused() > 0 ? absl::StrCat(", ", p.refused(), " refused") : "",
                                 ", wait ", FormatElapsed(ToDuration(p.mean_queue_wait()))));
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, "; ");
}

// With [tenants], those that did anything: "kv 2 in flight, 40 submitted
// (+5), wait 120us, 6.00 MiB registered, 1 refused; ops ...".
std::string TenantsText(const v1::Stats& now, const v1::Stats* before) {
  std::vector<std::string> parts;
  for (const v1::TenantStats& t : now.tenants()) {
    const uint64_t refused = t.refused_quota() + t.refused_access();
    if (t.transfers_submitted() == 0 && t.registered_bytes() == 0 && refused == 0) continue;
    uint64_t submitted_before = 0;
    if (before != nullptr) {
      for (const v1::TenantStats& u : before->tenants()) {
        if (u.name() == t.name()) submitted_before = u.transfers_submitted();
      }
    }
    parts.push_back(absl::StrCat(
        t.name(), " ", t.transfers_in_flight(), " in flight, ", t.transfers_submitted(),
        " submitted", Delta(t.transfers_submitted(), submitted_before, before != nullptr), ", ",
        t.transfers_started() > 0
            ? absl::StrCat("wait ", FormatElapsed(ToDuration(t.mean_queue_wait())), ", ")
            : "",
        FormatBytes(t.registered_bytes()), " registered",
        refused > 0 ? absl::StrCat(", ", refused, " refused") : ""));
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, "; ");
}

std::string Summary(const TopSample& now, const TopSample* previous, const TopRates& rates) {
  const v1::Stats& s = now.stats;
  const v1::Stats* b = previous != nullptr ? &previous->stats : nullptr;
  const bool known = rates.seconds > 0;
  std::vector<std::pair<std::string, std::string>> rows = {
      {"throughput", absl::StrCat("out ", Rate(rates.tx_bytes_per_second), ", in ",
                                  Rate(rates.rx_bytes_per_second))},
      {"transfers",
       absl::StrCat(s.transfers_in_flight(), " in flight, ", s.transfers_done(), " done",
                    Delta(s.transfers_done(), known ? b->transfers_done() : 0, known), ", ",
                    s.transfers_failed(), " failed",
                    Delta(s.transfers_failed(), known ? b->transfers_failed() : 0, known), ", ",
                    s.transfers_cancelled(), " cancelled",
                    Delta(s.transfers_cancelled(), known ? b->transfers_cancelled() : 0, known))},
      {"classes", ClassesText(s, known ? b : nullptr)},
      {"errors", ErrorsText(s, known ? b : nullptr)},
      {"peers", absl::StrCat(s.peers(), " (", s.open_lanes(), " lanes open)")},
      {"memory", absl::StrCat(s.regions(), " regions, ", FormatBytes(s.registered_bytes()),
                              " registered, ", s.memory_registrations(), " MRs")},
      {"process", absl::StrCat("rss ", FormatBytes(s.resident_bytes()), ", ", s.open_fds(),
                               " fds, ", s.threads(), " threads")},
  };
  // One tenant ("default", no [tenants]): nothing to tell apart.
  if (s.tenants_size() > 1) {
    rows.insert(rows.begin() + 3, {"tenants", TenantsText(s, known ? b : nullptr)});
  }
  return KeyValues(rows);
}

std::string PeersTable(const TopSample& now, const TopSample* previous, double seconds) {
  if (now.peers.peers().empty()) return "no peers\n";
  Table table({{"PEER"},
               {"STATE"},
               {"TRANSPORT"},
               {"LANES", true},
               {"SENT", true},
               {"RECEIVED", true},
               {"OUT/S", true},
               {"IN/S", true},
               {"ERROR"}});
  for (const v1::Peer& p : now.peers.peers()) {
    const auto [out, in] = PeerRates(p, previous, seconds);
    table.AddRow({p.node_id(), PeerStateLabel(p.state()), TransportLabel(p.transport()),
                  absl::StrCat(p.lanes()), FormatBytes(p.bytes_sent()),
                  FormatBytes(p.bytes_received()), Rate(out), Rate(in),
                  ErrorLabel(p.last_error())});
  }
  return table.Render();
}

std::string TransfersTable(const TopSample& now, const TopSample* previous, double seconds,
                           uint32_t max_rows) {
  const auto& transfers = now.transfers.transfers();
  if (transfers.empty()) return "no transfers in flight\n";
  Table table({{"TRANSFER", true},
               {"PEER"},
               {"DESTINATION"},
               {"CLASS"},
               {"STATE"},
               {"AGE", true},
               {"PROGRESS"}});
  const int rows = std::min<int>(transfers.size(), max_rows);
  for (int i = 0; i < rows; ++i) {
    const v1::Transfer& t = transfers[i];
    const absl::Duration age = std::max(absl::ZeroDuration(), now.at - ToTime(t.submitted_at()));
    table.AddRow({absl::StrCat(t.id()), t.peer(), absl::StrCat(t.dst_region(), "+", t.dst_offset()),
                  PriorityLabel(t.priority()), StateLabel(t.state()), FormatElapsed(age),
                  RenderProgress(t.bytes_done(), t.length(), TransferRate(t, previous, seconds),
                                 kBarWidth)});
  }
  std::string out = table.Render();
  const uint64_t in_flight = std::max<uint64_t>(now.stats.transfers_in_flight(), transfers.size());
  if (in_flight > static_cast<uint64_t>(rows)) {
    absl::StrAppend(&out, "... and ", in_flight - rows, " more in flight\n");
  }
  return out;
}

// A JSON number, or null when unknown (negative).
std::string JsonNumber(double value) { return value < 0 ? "null" : absl::StrFormat("%.3f", value); }

absl::StatusOr<std::string> JsonString(const std::string& text) {
  google::protobuf::Value value;
  value.set_string_value(text);
  return ToJson(value);
}

}  // namespace

TopRates RatesBetween(const TopSample* previous, const TopSample& now) {
  TopRates rates;
  if (previous == nullptr) return rates;
  const double seconds = absl::ToDoubleSeconds(Uptime(now.stats) - Uptime(previous->stats));
  if (seconds <= 0) return rates;  // another daemon (restarted), or no time passed
  rates.seconds = seconds;
  rates.tx_bytes_per_second =
      PerSecond(now.stats.bytes_sent(), previous->stats.bytes_sent(), seconds);
  rates.rx_bytes_per_second =
      PerSecond(now.stats.bytes_received(), previous->stats.bytes_received(), seconds);
  return rates;
}

std::string RenderTopText(const v1::NodeInfo& node, const TopSample& now, const TopSample* previous,
                          const TopOptions& options) {
  const TopRates rates = RatesBetween(previous, now);
  const TopSample* before = rates.seconds > 0 ? previous : nullptr;
  const std::string header =
      absl::StrCat("xferd ", node.node_id(), " (", TransportLabel(now.stats.transport()), ")  up ",
                   FormatElapsed(Uptime(now.stats)), "  every ", FormatElapsed(options.interval),
                   "  ", absl::FormatTime("%Y-%m-%d %H:%M:%S", now.at, absl::LocalTimeZone()));
  return absl::StrCat(header, "\n", Summary(now, before, rates), "\n",
                      PeersTable(now, before, rates.seconds), "\n",
                      TransfersTable(now, before, rates.seconds, options.max_transfers));
}

absl::StatusOr<std::string> RenderTopJson(const v1::NodeInfo& node, const TopSample& now,
                                          const TopSample* previous) {
  const TopRates rates = RatesBetween(previous, now);
  const TopSample* before = rates.seconds > 0 ? previous : nullptr;
  ASSIGN_OR_RETURN(std::string node_id, JsonString(node.node_id()));
  ASSIGN_OR_RETURN(std::string stats, ToJson(now.stats));
  std::vector<std::string> peers, peer_rates, transfers, transfer_rates;
  for (const v1::Peer& p : now.peers.peers()) {
    ASSIGN_OR_RETURN(std::string json, ToJson(p));
    ASSIGN_OR_RETURN(std::string name, JsonString(p.node_id()));
    peers.push_back(std::move(json));
    const auto [out, in] = PeerRates(p, before, rates.seconds);
    peer_rates.push_back(absl::StrCat(name, ":{\"tx_bytes_per_second\":", JsonNumber(out),
                                      ",\"rx_bytes_per_second\":", JsonNumber(in), "}"));
  }
  for (const v1::Transfer& t : now.transfers.transfers()) {
    ASSIGN_OR_RETURN(std::string json, ToJson(t));
    transfers.push_back(std::move(json));
    transfer_rates.push_back(
        absl::StrCat("\"", t.id(), "\":", JsonNumber(TransferRate(t, before, rates.seconds))));
  }
  return absl::StrCat(
      "{\"time\":\"", absl::FormatTime(absl::RFC3339_full, now.at, absl::UTCTimeZone()),
      "\",\"node_id\":", node_id, ",\"interval_seconds\":", JsonNumber(rates.seconds),
      ",\"tx_bytes_per_second\":", JsonNumber(rates.tx_bytes_per_second),
      ",\"rx_bytes_per_second\":", JsonNumber(rates.rx_bytes_per_second), ",\"peer_rates\":{",
      absl::StrJoin(peer_rates, ","), "},\"transfer_rates\":{", absl::StrJoin(transfer_rates, ","),
      "},\"stats\":", stats, ",\"peers\":[", absl::StrJoin(peers, ","), "],\"transfers\":[",
      absl::StrJoin(transfers, ","), "]}");
}

}  // namespace xferd::client
