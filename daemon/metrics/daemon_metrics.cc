#include "daemon/metrics/daemon_metrics.h"

#include <sys/resource.h>

#include "absl/strings/str_cat.h"
#include "daemon/common/process_stats.h"

namespace xferd::metrics {
namespace {

using engine::EngineStats;
using engine::TransferState;

// Indexes of PeerSeries::outcomes, and their label values.
constexpr const char* kOutcomes[] = {"done", "failed", "cancelled"};

size_t OutcomeIndex(TransferState state) {
  switch (state) {
    case TransferState::kDone:
      return 0;
    case TransferState::kCancelled:
      return 2;
    default:
      return 1;
  }
}

std::string KindLabel(transport::TransportKind kind) {
  return std::string(transport::TransportKindName(kind));
}

// Appends a family of one series with these labels (none by default).
void AddOne(std::vector<FamilySnapshot>* out, const char* name, const char* help, MetricType type,
            double value, std::vector<std::string> label_names = {}, LabelValues labels = {}) {
  FamilySnapshot family(name, help, type, std::move(label_names));
  family.Add(std::move(labels), value);
  out->push_back(std::move(family));
}

void CollectTraffic(const EngineStats& s, const std::string& transport,
                    std::vector<FamilySnapshot>* out) {
  FamilySnapshot tx(
      "xferd_tx_bytes_total",
      "Payload bytes this daemon wrote to the peer and the peer acknowledged, over every "
      "link to it since the daemon started (NIXL: agent_tx_bytes_total).",
      MetricType::kCounter, {"peer", "transport"});
  FamilySnapshot rx(
      "xferd_rx_bytes_total",
      "Payload bytes the peer wrote into this daemon's regions (NIXL: agent_rx_bytes_total). "
      "TCP counts every inbound write; verbs counts a transfer when its landing notice "
      "arrives, since the NIC places the data without the CPU.",
      MetricType::kCounter, {"peer", "transport"});
  FamilySnapshot rejected(
      "xferd_rejected_writes_total",
      "Inbound writes from the peer that this daemon refused (unknown region, out of bounds, "
      "no remote-write access, not in the region's ACL). Non-zero means a misbehaving or "
      "out-of-date peer.",
      MetricType::kCounter, {"peer", "transport"});
  for (const auto& [peer, traffic] : s.traffic) {
    tx.Add({peer, transport}, static_cast<double>(traffic.bytes_sent));
    rx.Add({peer, transport}, static_cast<double>(traffic.bytes_received));
    rejected.Add({peer, transport}, static_cast<double>(traffic.rejected_writes));
  }
  out->push_back(std::move(tx));
  out->push_back(std::move(rx));
  out->push_back(std::move(rejected));
}

void CollectTransferCounts(const EngineStats& s, std::vector<FamilySnapshot>* out) {
  AddOne(out, "xferd_transfers_submitted_total",
         "Transfers this daemon accepted (validated and queued) since it started.",
         MetricType::kCounter, static_cast<double>(s.transfers.submitted));
  AddOne(out, "xferd_transfers_in_flight",
         "Transfers queued or running now (at most engine.max_inflight_transfers).",
         MetricType::kGauge, s.transfers.in_flight);
  FamilySnapshot errors(
      "xferd_errors_total",
      "Transfers that ended with an error, by gRPC status code name (NIXL: agent_errors_total): "
      "UNAVAILABLE (peer gone or link broken), DEADLINE_EXCEEDED (the transfer's timeout), "
      "CANCELLED (on request, or its region was deregistered), NOT_FOUND (the peer dropped the "
      "destination region), ... The same counts as `xferctl stats`.",
      MetricType::kCounter, {"code"});
  for (const auto& [code, count] : s.transfers.errors) {
    errors.Add({code}, static_cast<double>(count));
  }
  out->push_back(std::move(errors));
  AddOne(out, "xferd_landed_events_total",
         "Landed events raised on this daemon's regions: peers' transfers that completed "
         "into them (what WatchRegion streams report).",
         MetricType::kCounter, static_cast<double>(s.landed_events));
}

void CollectResources(const EngineStats& s, const std::string& transport,
                      std::vector<FamilySnapshot>* out) {
  AddOne(out, "xferd_memory_registered_bytes",
         "Bytes of all registered regions (NIXL: agent_memory_registered). On verbs this "
         "memory is pinned: compare with the memlock limit.",
         MetricType::kGauge, static_cast<double>(s.registered_bytes));
  AddOne(out, "xferd_memory_regions", "Registered regions.", MetricType::kGauge, s.regions);
  AddOne(out, "xferd_transport_lanes",
         "Lanes the transport holds open now: RC queue pairs (verbs) or TCP connections, over "
         "all peers. Should return to 0 when every peer is gone (leak check).",
         MetricType::kGauge, s.transport.lanes, {"transport"}, {transport});
  AddOne(out, "xferd_transport_memory_registrations",
         "Memory registrations the transport holds now (verbs MRs; large regions are registered "
         "in transport.verbs_mr_chunk pieces). 0 on TCP.",
         MetricType::kGauge, s.transport.memory_registrations, {"transport"}, {transport});
}

void CollectPeers(const std::vector<engine::PeerInfo>& peers, std::vector<FamilySnapshot>* out) {
  uint32_t by_state[3] = {};  // engine::PeerState order
  for (const engine::PeerInfo& p : peers) ++by_state[static_cast<int>(p.state)];
  FamilySnapshot f(
      "xferd_peers",
      "Peer daemons by state: connecting (handshake in progress), connected (every lane up), "
      "broken (a lane failed; the next write to it reconnects).",
      MetricType::kGauge, {"state"});
  f.Add({"connecting"}, by_state[static_cast<int>(engine::PeerState::kConnecting)]);
  f.Add({"connected"}, by_state[static_cast<int>(engine::PeerState::kConnected)]);
  f.Add({"broken"}, by_state[static_cast<int>(engine::PeerState::kBroken)]);
  out->push_back(std::move(f));
}

void CollectPollers(const EngineStats& s, std::vector<FamilySnapshot>* out) {
  FamilySnapshot asleep(
      "xferd_poller_sleep_seconds_total",
      "Time the poller thread spent asleep (idle, blocked on its completion channel or epoll "
      "set). Its busy fraction is 1 - rate(xferd_poller_sleep_seconds_total[1m]).",
      MetricType::kCounter, {"poller"});
  FamilySnapshot sleeps("xferd_poller_sleeps_total",
                        "Times the poller went to sleep after spinning idle for engine.spin.",
                        MetricType::kCounter, {"poller"});
  FamilySnapshot sleeping("xferd_poller_sleeping",
                          "1 while the poller thread sleeps, 0 while it polls.", MetricType::kGauge,
                          {"poller"});
  FamilySnapshot active("xferd_poller_active_transfers", "Transfers the poller is serving now.",
                        MetricType::kGauge, {"poller"});
  for (size_t i = 0; i < s.pollers.size(); ++i) {
    const engine::PollerStats& p = s.pollers[i];
    const std::string poller = absl::StrCat(i);
    asleep.Add({poller}, absl::ToDoubleSeconds(p.asleep));
    sleeps.Add({poller}, static_cast<double>(p.sleeps));
    sleeping.Add({poller}, p.sleeping ? 1 : 0);
    active.Add({poller}, p.active_transfers);
  }
  for (FamilySnapshot* f : {&asleep, &sleeps, &sleeping, &active}) out->push_back(std::move(*f));
}

}  // namespace

std::vector<double> TransferTimeBuckets() { return DecadeBuckets(1e-4, 100); }

DaemonMetrics::DaemonMetrics(engine::Engine& engine, std::string version, absl::Time started_at)
    : engine_(engine), version_(std::move(version)), started_at_(started_at) {
  registry_.AddCollector([this](std::vector<FamilySnapshot>* out) {
    AddOne(out, "xferd_build_info",
           "Always 1: the xferd version, and the transport this daemon uses for every peer (tcp "
           "on an RDMA host means it fell back: see xferctl info).",
           MetricType::kGauge, 1, {"version", "transport"},
           {version_, KindLabel(engine_.transport().kind())});
  });
  // Before the per-transfer families: it creates their series for new peers.
  registry_.AddCollector([this](std::vector<FamilySnapshot>* out) { CollectEngine(out); });
  transfers_ = &registry_.AddCounter(
      "xferd_transfers_total",
      "Transfers this daemon started that ended, by peer, transport and outcome (done, "
      "failed, cancelled). Counted once, when the transfer ends.",
      {"peer", "transport", "outcome"});
  xfer_time_ = &registry_.AddHistogram(
      "xferd_xfer_time_seconds",
      "Time from submission to completion of the transfers that ended done, by peer and "
      "transport (NIXL: agent_xfer_time_us, in seconds here).",
      {"peer", "transport"}, TransferTimeBuckets());
  registry_.AddCollector([this](std::vector<FamilySnapshot>* out) { CollectProcess(out); });
  engine_.SetTransferRecorder(this);
}

DaemonMetrics::~DaemonMetrics() { engine_.SetTransferRecorder(nullptr); }

DaemonMetrics::PeerSeries& DaemonMetrics::SeriesFor(const std::string& peer,
                                                    transport::TransportKind transport) const {
  PeerSeries& series = series_[peer][static_cast<int>(transport)];
  if (series.time == nullptr) {
    const std::string kind = KindLabel(transport);
    for (size_t i = 0; i < series.outcomes.size(); ++i) {
      series.outcomes[i] = &transfers_->WithLabels({peer, kind, kOutcomes[i]});
    }
    series.time = &xfer_time_->WithLabels({peer, kind});
  }
  return series;
}

void DaemonMetrics::RecordTransfer(const engine::TransferInfo& info) {
  Counter* outcome;
  Histogram* time = nullptr;
  {
    MutexLock lock(&mu_);
    PeerSeries& series = SeriesFor(info.peer_node, info.transport);
    outcome = series.outcomes[OutcomeIndex(info.state)];
    if (info.state == TransferState::kDone) time = series.time;
  }
  outcome->Increment();
  if (time != nullptr) time->Observe(absl::ToDoubleSeconds(info.finished_at - info.submitted_at));
}

void DaemonMetrics::CollectEngine(std::vector<FamilySnapshot>* out) const {
  const EngineStats stats = engine_.Stats();
  const transport::TransportKind kind = engine_.transport().kind();
  {
    // Every peer's transfer series exist from its first contact, at zero, so
    // the first failure shows in increase() and rate().
    MutexLock lock(&mu_);
    for (const auto& [peer, traffic] : stats.traffic) SeriesFor(peer, kind);
  }
  CollectTraffic(stats, KindLabel(kind), out);
  CollectTransferCounts(stats, out);
  CollectResources(stats, KindLabel(kind), out);
  CollectPeers(engine_.ListPeers(), out);
  CollectPollers(stats, out);
}

void DaemonMetrics::CollectProcess(std::vector<FamilySnapshot>* out) const {
  const ProcessStats p = ReadProcessStats();
  AddOne(out, "process_resident_memory_bytes", "Resident memory of the xferd process (VmRSS).",
         MetricType::kGauge, static_cast<double>(p.resident_bytes));
  AddOne(out, "process_open_fds", "Open file descriptors of the xferd process.", MetricType::kGauge,
         p.open_fds);
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    AddOne(out, "process_max_fds", "The process's limit on open file descriptors.",
           MetricType::kGauge, static_cast<double>(files.rlim_cur));
  }
  AddOne(out, "process_threads", "Threads of the xferd process.", MetricType::kGauge, p.threads);
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  AddOne(out, "process_cpu_seconds_total", "User and system CPU time of the xferd process.",
         MetricType::kCounter, cpu);
  AddOne(out, "process_start_time_seconds", "When xferd started, in seconds since the epoch.",
         MetricType::kGauge, absl::ToDoubleSeconds(started_at_ - absl::UnixEpoch()));
}

}  // namespace xferd::metrics
