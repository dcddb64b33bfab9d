#include "daemon/metrics/daemon_metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_type.h>
#include <sys/resource.h>

#include "absl/strings/str_cat.h"
#include "daemon/common/process_stats.h"

namespace xferd::metrics {
namespace {

using engine::EngineStats;
using engine::TransferState;
using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Families = std::vector<MetricFamily>;
// Label name-value pairs of one series, in the family's label order.
using LabelPairs = std::vector<ClientMetric::Label>;

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

MetricFamily NewFamily(const char* name, const char* help, MetricType type) {
  return MetricFamily{name, help, type, {}};
}

// Appends a counter or gauge series to `family`.
void Add(MetricFamily& family, LabelPairs labels, double value) {
  ClientMetric& series = family.metric.emplace_back();
  series.label = std::move(labels);
  if (family.type == MetricType::Counter) {
    series.counter.value = value;
  } else {
    series.gauge.value = value;
  }
}

// Appends a family of one series with these labels (none by default).
void AddOne(Families* out, const char* name, const char* help, MetricType type, double value,
            LabelPairs labels = {}) {
  MetricFamily family = NewFamily(name, help, type);
  Add(family, std::move(labels), value);
  out->push_back(std::move(family));
}

void CollectTraffic(const EngineStats& s, const std::string& transport, Families* out) {
  MetricFamily tx =
      NewFamily("xferd_tx_bytes_total",
                "Payload bytes this daemon wrote to the peer and the peer acknowledged, over every "
                "link to it since the daemon started (NIXL: agent_tx_bytes_total).",
                MetricType::Counter);
  MetricFamily rx = NewFamily(
      "xferd_rx_bytes_total",
      "Payload bytes the peer wrote into this daemon's regions (NIXL: agent_rx_bytes_total). "
      "TCP counts every inbound write; verbs counts a transfer when its landing notice "
      "arrives, since the NIC places the data without the CPU.",
      MetricType::Counter);
  MetricFamily rejected = NewFamily(
      "xferd_rejected_writes_total",
      "Inbound writes from the peer that this daemon refused (unknown region, out of bounds, "
      "no remote-write access, not in the region's ACL). Non-zero means a misbehaving or "
      "out-of-date peer.",
      MetricType::Counter);
  // Node ids are valid UTF-8, as label values must be: peers send them in
  // proto3 strings, which protobuf refuses to parse otherwise.
  for (const auto& [peer, traffic] : s.traffic) {
    const LabelPairs labels = {{"peer", peer}, {"transport", transport}};
    Add(tx, labels, static_cast<double>(traffic.bytes_sent));
    Add(rx, labels, static_cast<double>(traffic.bytes_received));
    Add(rejected, labels, static_cast<double>(traffic.rejected_writes));
  }
  out->push_back(std::move(tx));
  out->push_back(std::move(rx));
  out->push_back(std::move(rejected));
}

void CollectTransferCounts(const EngineStats& s, uint32_t max_in_flight, Families* out) {
  AddOne(out, "xferd_transfers_submitted_total",
         "Transfers this daemon accepted (validated and queued) since it started.",
         MetricType::Counter, static_cast<double>(s.transfers.submitted));
  AddOne(out, "xferd_transfers_in_flight",
         "Transfers queued or running now (at most xferd_transfers_in_flight_max).",
         MetricType::Gauge, s.transfers.in_flight);
  AddOne(out, "xferd_transfers_in_flight_max",
         "engine.max_inflight_transfers: beyond it, new transfers are refused "
         "RESOURCE_EXHAUSTED.",
         MetricType::Gauge, max_in_flight);
  MetricFamily errors = NewFamily(
      "xferd_errors_total",
      "Transfers that ended with an error, by gRPC status code name (NIXL: agent_errors_total): "
      "UNAVAILABLE (peer gone or link broken), DEADLINE_EXCEEDED (the transfer's timeout), "
      "CANCELLED (on request, or its region was deregistered), NOT_FOUND (the peer dropped the "
      "destination region), ... The same counts as `xferctl stats`.",
      MetricType::Counter);
  for (const auto& [code, count] : s.transfers.errors) {
    Add(errors, {{"code", code}}, static_cast<double>(count));
  }
  out->push_back(std::move(errors));
  MetricFamily refused = NewFamily(
      "xferd_refused_submissions_total",
      "Write/Read/SubmitBatch/SubmitStream requests refused before any transfer started, by gRPC "
      "status code name: INVALID_ARGUMENT (a bad block or request), OUT_OF_RANGE (a block "
      "outside its region), PERMISSION_DENIED (access flags, ACL), NOT_FOUND (unknown peer or "
      "region), RESOURCE_EXHAUSTED (limits), ... The same counts as `xferctl stats`.",
      MetricType::Counter);
  for (const auto& [code, count] : s.transfers.refused) {
    Add(refused, {{"code", code}}, static_cast<double>(count));
  }
  out->push_back(std::move(refused));
  AddOne(out, "xferd_landed_events_total",
         "Landed events raised on this daemon's regions: peers' transfers that completed "
         "into them (what WatchRegion streams report).",
         MetricType::Counter, static_cast<double>(s.landed_events));
}

// The transfer counts of each priority class (docs/priorities.md).
void CollectPriorities(const EngineStats& s, Families* out) {
  MetricFamily submitted = NewFamily("xferd_priority_submitted_total",
                                     "Transfers accepted, by priority class.", MetricType::Counter);
  MetricFamily ended =
      NewFamily("xferd_priority_transfers_total",
                "Transfers that ended, by priority class and outcome (done, failed, cancelled).",
                MetricType::Counter);
  MetricFamily refused = NewFamily(
      "xferd_priority_refused_total",
      "Submissions refused before any transfer started, by the priority class of their first "
      "request (RESOURCE_EXHAUSTED below critical: priorities.critical_reserve).",
      MetricType::Counter);
  MetricFamily in_flight =
      NewFamily("xferd_priority_in_flight", "Transfers queued or running now, by priority class.",
                MetricType::Gauge);
  MetricFamily bytes = NewFamily("xferd_priority_bytes_total",
                                 "Payload bytes of the transfers that ended, by priority class.",
                                 MetricType::Counter);
  MetricFamily wait = NewFamily(
      "xferd_priority_queue_wait_seconds_total",
      "Summed wait from submission to the first op on a lane, of the transfers that ended having "
      "posted one (xferd_priority_started_total): their ratio is the mean wait.",
      MetricType::Counter);
  MetricFamily started = NewFamily("xferd_priority_started_total",
                                   "Transfers that ended having posted an op, by priority class.",
                                   MetricType::Counter);
  for (engine::Priority priority : engine::kAllPriorities) {
    const engine::PriorityCounters& c = s.transfers.by_priority[engine::PriorityIndex(priority)];
    const std::string name = engine::PriorityName(priority);
    Add(submitted, {{"priority", name}}, static_cast<double>(c.submitted));
    Add(ended, {{"priority", name}, {"outcome", "done"}}, static_cast<double>(c.done));
    Add(ended, {{"priority", name}, {"outcome", "failed"}}, static_cast<double>(c.failed));
    Add(ended, {{"priority", name}, {"outcome", "cancelled"}}, static_cast<double>(c.cancelled));
    Add(refused, {{"priority", name}}, static_cast<double>(c.refused));
    Add(in_flight, {{"priority", name}}, c.in_flight);
    Add(bytes, {{"priority", name}}, static_cast<double>(c.bytes));
    Add(wait, {{"priority", name}}, absl::ToDoubleSeconds(c.queue_wait));
    Add(started, {{"priority", name}}, static_cast<double>(c.started));
  }
  for (MetricFamily* f : {&submitted, &ended, &refused, &in_flight, &bytes, &wait, &started}) {
    out->push_back(std::move(*f));
  }
}

// docs/tenants.md: per tenant ("default" included), its use and limits.
void CollectTenants(const EngineStats& s, Families* out) {
  MetricFamily registered =
      NewFamily("xferd_tenant_registered_bytes", "Bytes of the regions a tenant registered.",
                MetricType::Gauge);
  MetricFamily registered_max = NewFamily(
      "xferd_tenant_max_registered_bytes",
      "A tenant's tenants.<name>.max_registered_bytes (0: none of its own).", MetricType::Gauge);
  MetricFamily in_flight = NewFamily(
      "xferd_tenant_in_flight", "A tenant's transfers queued or running now.", MetricType::Gauge);
  MetricFamily in_flight_max = NewFamily(
      "xferd_tenant_max_inflight_transfers",
      "A tenant's tenants.<name>.max_inflight_transfers (0: none of its own).", MetricType::Gauge);
  MetricFamily submitted = NewFamily("xferd_tenant_submitted_total",
                                     "Transfers a tenant's clients started.", MetricType::Counter);
  MetricFamily bytes =
      NewFamily("xferd_tenant_bytes_total", "Payload bytes of a tenant's transfers that ended.",
                MetricType::Counter);
  MetricFamily refused = NewFamily(
      "xferd_tenant_refused_total",
      "A tenant's requests refused: reason=\"quota\" by one of its limits (RESOURCE_EXHAUSTED), "
      "reason=\"access\" for a class above its max_priority or another tenant's object "
      "(PERMISSION_DENIED).",
      MetricType::Counter);
  MetricFamily wait = NewFamily(
      "xferd_tenant_queue_wait_seconds_total",
      "Summed wait from submission to the first op on a lane, of a tenant's transfers that ended "
      "having posted one (xferd_tenant_started_total): their ratio is the mean wait.",
      MetricType::Counter);
  MetricFamily started =
      NewFamily("xferd_tenant_started_total",
                "A tenant's transfers that ended having posted an op.", MetricType::Counter);
  for (const engine::TenantStats& t : s.tenants) {
    const LabelPairs tenant = {{"tenant", t.name}};
    Add(registered, tenant, static_cast<double>(t.registered_bytes));
    Add(registered_max, tenant, static_cast<double>(t.max_registered_bytes));
    Add(in_flight, tenant, t.in_flight);
    Add(in_flight_max, tenant, t.max_inflight_transfers);
    Add(submitted, tenant, static_cast<double>(t.submitted));
    Add(bytes, tenant, static_cast<double>(t.bytes));
    Add(refused, {{"tenant", t.name}, {"reason", "quota"}}, static_cast<double>(t.refused_quota));
    Add(refused, {{"tenant", t.name}, {"reason", "access"}}, static_cast<double>(t.refused_access));
    Add(started, tenant, static_cast<double>(t.started));
    Add(wait, tenant, absl::ToDoubleSeconds(t.queue_wait));
  }
  for (MetricFamily* f : {&registered, &registered_max, &in_flight, &in_flight_max, &submitted,
                          &bytes, &refused, &wait, &started}) {
    out->push_back(std::move(*f));
  }
}

void CollectResources(const EngineStats& s, uint64_t max_registered_bytes,
                      const std::string& transport, Families* out) {
  AddOne(out, "xferd_memory_registered_bytes",
         "Bytes of all registered regions (NIXL: agent_memory_registered). On verbs this "
         "memory is pinned: compare with the memlock limit.",
         MetricType::Gauge, static_cast<double>(s.registered_bytes));
  // Exported at 0 too, so that a dashboard shows "no cap" rather than nothing.
  AddOne(out, "xferd_memory_registered_bytes_max",
         "regions.max_registered_bytes, 0 for no cap: beyond it, registrations are refused "
         "RESOURCE_EXHAUSTED.",
         MetricType::Gauge, static_cast<double>(max_registered_bytes));
  AddOne(out, "xferd_memory_regions", "Registered regions.", MetricType::Gauge, s.regions);
  AddOne(out, "xferd_transport_lanes",
         "Lanes the transport holds open now: RC queue pairs (verbs) or TCP connections, over "
         "all peers. Should return to 0 when every peer is gone (leak check).",
         MetricType::Gauge, s.transport.lanes, {{"transport", transport}});
  AddOne(out, "xferd_transport_memory_registrations",
         "Memory registrations the transport holds now (verbs MRs; large regions are registered "
         "in transport.verbs_mr_chunk pieces). 0 on TCP.",
         MetricType::Gauge, s.transport.memory_registrations, {{"transport", transport}});
  if (s.transport.devices.empty()) return;
  MetricFamily sent = NewFamily(
      "xferd_device_sent_bytes_total",
      "Payload bytes of this daemon's RDMA writes that completed on each device (striping "
      "spreads a transfer over the devices by port rate).",
      MetricType::Counter);
  MetricFamily received = NewFamily(
      "xferd_device_received_bytes_total",
      "Payload bytes of this daemon's RDMA reads that completed on each device.",
      MetricType::Counter);
  MetricFamily failovers = NewFamily(
      "xferd_device_failovers_total",
      "Ops moved from each device to another one after the device failed (port down, "
      "completion error).",
      MetricType::Counter);
  MetricFamily rejoins = NewFamily(
      "xferd_device_rejoins_total",
      "Device pairs of live links on each device put back in service after they broke (the "
      "port came back, or a queue pair failed), without a reconnect.",
      MetricType::Counter);
  MetricFamily windows =
      NewFamily("xferd_device_memory_windows",
                "Memory windows open on each device (keys granted to one lane of one peer each); "
                "resolving a region for a peer, or a new link, fails once "
                "xferd_device_memory_windows_max is reached.",
                MetricType::Gauge);
  MetricFamily max_windows =
      NewFamily("xferd_device_memory_windows_max",
                "The most memory windows each device allows (max_mw).", MetricType::Gauge);
  MetricFamily up = NewFamily("xferd_device_up",
                              "1 while the device's port is ACTIVE, 0 after a port-down event.",
                              MetricType::Gauge);
  for (const transport::DeviceStats& d : s.transport.devices) {
    const LabelPairs labels = {{"device", d.name}, {"numa_node", absl::StrCat(d.numa_node)}};
    Add(sent, labels, static_cast<double>(d.bytes_sent));
    Add(received, labels, static_cast<double>(d.bytes_received));
    Add(failovers, labels, static_cast<double>(d.failovers));
    Add(rejoins, labels, static_cast<double>(d.rejoins));
    Add(windows, labels, d.memory_windows);
    Add(max_windows, labels, d.max_memory_windows);
    Add(up, labels, d.up ? 1 : 0);
  }
  for (MetricFamily* f : {&sent, &received, &failovers, &rejoins, &windows, &max_windows, &up}) {
    out->push_back(std::move(*f));
  }
}

void CollectPeers(const std::vector<engine::PeerInfo>& peers, Families* out) {
  uint32_t by_state[3] = {};  // engine::PeerState order
  for (const engine::PeerInfo& p : peers) ++by_state[static_cast<int>(p.state)];
  MetricFamily f = NewFamily(
      "xferd_peers",
      "Peer daemons by state: connecting (handshake in progress), connected (every lane up), "
      "broken (a lane failed; the next write to it reconnects).",
      MetricType::Gauge);
  Add(f, {{"state", "connecting"}}, by_state[static_cast<int>(engine::PeerState::kConnecting)]);
  Add(f, {{"state", "connected"}}, by_state[static_cast<int>(engine::PeerState::kConnected)]);
  Add(f, {{"state", "broken"}}, by_state[static_cast<int>(engine::PeerState::kBroken)]);
  out->push_back(std::move(f));
}

void CollectPollers(const EngineStats& s, Families* out) {
  MetricFamily asleep = NewFamily(
      "xferd_poller_sleep_seconds_total",
      "Time the poller thread spent asleep (idle, blocked on its completion channel or epoll "
      "set). Its busy fraction is 1 - rate(xferd_poller_sleep_seconds_total[1m]).",
      MetricType::Counter);
  MetricFamily sleeps = NewFamily(
      "xferd_poller_sleeps_total",
      "Times the poller went to sleep after spinning idle (see xferd_poller_spin_seconds).",
      MetricType::Counter);
  MetricFamily sleeping =
      NewFamily("xferd_poller_sleeping", "1 while the poller thread sleeps, 0 while it polls.",
                MetricType::Gauge);
  MetricFamily active = NewFamily("xferd_poller_active_transfers",
                                  "Transfers the poller is serving now.", MetricType::Gauge);
  MetricFamily spin = NewFamily(
      "xferd_poller_spin_seconds",
      "How long the poller now busy-polls after its last work before it sleeps: engine.spin, "
      "doubled up to engine.spin_max while work keeps waking it within engine.spin_max.",
      MetricType::Gauge);
  for (size_t i = 0; i < s.pollers.size(); ++i) {
    const engine::PollerStats& p = s.pollers[i];
    const LabelPairs poller = {{"poller", absl::StrCat(i)}};
    Add(asleep, poller, absl::ToDoubleSeconds(p.asleep));
    Add(sleeps, poller, static_cast<double>(p.sleeps));
    Add(sleeping, poller, p.sleeping ? 1 : 0);
    Add(active, poller, p.active_transfers);
    Add(spin, poller, absl::ToDoubleSeconds(p.spin));
  }
  for (MetricFamily* f : {&asleep, &sleeps, &sleeping, &active, &spin}) {
    out->push_back(std::move(*f));
  }
}

}  // namespace

prometheus::Histogram::BucketBoundaries TransferTimeBuckets() {
  return {1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1,
          0.25, 0.5,    1,    2.5,  5,      10,   25,   50,     100};
}

DaemonMetrics::DaemonMetrics(engine::Engine& engine, std::string version, absl::Time started_at,
                             uint64_t max_registered_bytes)
    : engine_(engine),
      version_(std::move(version)),
      started_at_(started_at),
      max_registered_bytes_(max_registered_bytes),
      transfers_(prometheus::BuildCounter()
                     .Name("xferd_transfers_total")
                     .Help("Transfers this daemon started that ended, by peer, transport and "
                           "outcome (done, failed, cancelled). Counted once, when the transfer "
                           "ends.")
                     .Register(registry_)),
      xfer_time_(prometheus::BuildHistogram()
                     .Name("xferd_xfer_time_seconds")
                     .Help("Time from submission to completion of the transfers that ended "
                           "done, by peer and transport (NIXL: agent_xfer_time_us, in seconds "
                           "here).")
                     .Register(registry_)) {
  engine_.SetTransferRecorder(this);
}

DaemonMetrics::~DaemonMetrics() { engine_.SetTransferRecorder(nullptr); }

std::vector<MetricFamily> DaemonMetrics::Collect() const {
  Families out;
  AddOne(&out, "xferd_build_info",
         "Always 1: the xferd version, and the transport this daemon uses for every peer (tcp "
         "on an RDMA host means it fell back: see xferctl info).",
         MetricType::Gauge, 1,
         {{"version", version_}, {"transport", KindLabel(engine_.transport_kind())}});
  // Before the per-transfer families: it creates their series for new peers.
  CollectEngine(&out);
  for (MetricFamily& family : registry_.Collect()) out.push_back(std::move(family));
  CollectDirectory(&out);
  CollectProcess(&out);
  return out;
}

void DaemonMetrics::SetDirectoryProbe(std::function<bool()> connected) {
  MutexLock lock(&probe_mu_);
  directory_probe_ = std::move(connected);
}

void DaemonMetrics::CollectDirectory(Families* out) const {
  MutexLock lock(&probe_mu_);
  if (!directory_probe_) return;
  AddOne(out, "xferd_directory_connected",
         "With [cluster]: 1 while this daemon's etcd lease holds (it is in the cluster "
         "directory), 0 while it has lost etcd and retries. After cluster.lease_ttl at 0 its "
         "record has expired: other daemons treat it as gone.",
         MetricType::Gauge, directory_probe_() ? 1 : 0);
}

DaemonMetrics::PeerSeries& DaemonMetrics::SeriesFor(const std::string& peer,
                                                    transport::TransportKind transport) const {
  PeerSeries& series = series_[peer][static_cast<int>(transport)];
  if (series.time == nullptr) {
    const std::string kind = KindLabel(transport);
    for (size_t i = 0; i < series.outcomes.size(); ++i) {
      series.outcomes[i] =
          &transfers_.Add({{"peer", peer}, {"transport", kind}, {"outcome", kOutcomes[i]}});
    }
    series.time = &xfer_time_.Add({{"peer", peer}, {"transport", kind}}, TransferTimeBuckets());
  }
  return series;
}

void DaemonMetrics::RecordTransfer(const engine::TransferInfo& info) {
  prometheus::Counter* outcome;
  prometheus::Histogram* time = nullptr;
  {
    MutexLock lock(&mu_);
    PeerSeries& series = SeriesFor(info.peer_node, info.transport);
    outcome = series.outcomes[OutcomeIndex(info.state)];
    if (info.state == TransferState::kDone) time = series.time;
  }
  outcome->Increment();
  if (time != nullptr) time->Observe(absl::ToDoubleSeconds(info.finished_at - info.submitted_at));
}

void DaemonMetrics::CollectEngine(Families* out) const {
  const EngineStats stats = engine_.Stats();
  const transport::TransportKind kind = engine_.transport_kind();
  {
    // Every peer's transfer series exist from its first contact, at zero, so
    // the first failure shows in increase() and rate().
    MutexLock lock(&mu_);
    for (const auto& [peer, traffic] : stats.traffic) SeriesFor(peer, kind);
  }
  CollectTraffic(stats, KindLabel(kind), out);
  CollectTransferCounts(stats, engine_.config().max_inflight_transfers, out);
  CollectPriorities(stats, out);
  CollectTenants(stats, out);
  CollectResources(stats, max_registered_bytes_, KindLabel(kind), out);
  CollectPeers(engine_.ListPeers(), out);
  CollectPollers(stats, out);
}

void DaemonMetrics::CollectProcess(Families* out) const {
  const ProcessStats p = ReadProcessStats();
  AddOne(out, "process_resident_memory_bytes", "Resident memory of the xferd process (VmRSS).",
         MetricType::Gauge, static_cast<double>(p.resident_bytes));
  AddOne(out, "process_open_fds", "Open file descriptors of the xferd process.", MetricType::Gauge,
         p.open_fds);
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    AddOne(out, "process_max_fds", "The process's limit on open file descriptors.",
           MetricType::Gauge, static_cast<double>(files.rlim_cur));
  }
  AddOne(out, "process_threads", "Threads of the xferd process.", MetricType::Gauge, p.threads);
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  AddOne(out, "process_cpu_seconds_total", "User and system CPU time of the xferd process.",
         MetricType::Counter, cpu);
  AddOne(out, "process_start_time_seconds", "When xferd started, in seconds since the epoch.",
         MetricType::Gauge, absl::ToDoubleSeconds(started_at_ - absl::UnixEpoch()));
}

}  // namespace xferd::metrics
