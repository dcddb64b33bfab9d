// The metrics of one xferd daemon, as Prometheus scrapes them (names after
// NIXL's telemetry, prefixed xferd_; process_* as every Prometheus client
// names them). Two sources, neither on the data path: each transfer is
// recorded once, when it ends (outcome and latency, by peer and transport);
// everything else is read at scrape time from counters the engine, transport
// and /proc already keep. README.md ("Metrics") documents every family.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "daemon/common/mutex.h"
#include "daemon/engine/engine.h"
#include "daemon/metrics/registry.h"

namespace xferd::metrics {

// Latency buckets of xferd_xfer_time_seconds: 100 us to 100 s, 1-2.5-5 per
// decade (a 4 KiB write on loopback up to a 100 GiB file over one NIC).
std::vector<double> TransferTimeBuckets();

class DaemonMetrics final : public engine::TransferRecorder {
 public:
  // Registers itself as `engine`'s transfer recorder. `engine` outlives it.
  // `version` and `started_at` go to build info and process start time.
  DaemonMetrics(engine::Engine& engine, std::string version, absl::Time started_at);
  // Unregisters. Destroy it only after Engine::Stop (no transfer may end
  // concurrently with the destructor).
  ~DaemonMetrics() override;

  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // Engine: a transfer ended. A map lookup by peer under a mutex and a few
  // atomic adds.
  void RecordTransfer(const engine::TransferInfo& info) override;

  // The text exposition of every family. Any thread (the HTTP server's).
  std::string Render() const { return registry_.Render(); }
  const Registry& registry() const { return registry_; }

 private:
  // The series one (peer, transport) records into, found once.
  struct PeerSeries {
    std::array<Counter*, 3> outcomes{};  // done, failed, cancelled
    Histogram* time = nullptr;
  };

  // The series of a (peer, transport), created at zero on first use.
  PeerSeries& SeriesFor(const std::string& peer, transport::TransportKind transport) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CollectEngine(std::vector<FamilySnapshot>* out) const;
  void CollectProcess(std::vector<FamilySnapshot>* out) const;

  engine::Engine& engine_;
  const std::string version_;
  const absl::Time started_at_;
  Registry registry_;
  // Owned by registry_; set in the constructor.
  CounterFamily* transfers_ = nullptr;
  HistogramFamily* xfer_time_ = nullptr;

  mutable Mutex mu_;
  // By peer node id, then by transport kind.
  mutable absl::flat_hash_map<std::string, std::array<PeerSeries, 2>> series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xferd::metrics
