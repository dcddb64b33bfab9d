// The metrics of one xferd daemon (names after NIXL's telemetry, prefixed
// xferd_; process_* as every client names them), on prometheus-cpp. Nothing
// on the data path: each transfer is recorded once, when it ends; the rest is
// read at scrape time from counters the engine, transport and /proc keep.
// README.md ("Metrics") documents every family.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/engine/engine.h"

namespace xferd::metrics {

// Latency buckets of xferd_xfer_time_seconds: 100 us to 100 s, 1-2.5-5 per
// decade (a 4 KiB write on loopback up to a 100 GiB file over one NIC).
prometheus::Histogram::BucketBoundaries TransferTimeBuckets();

// A prometheus::Collectable: the families recorded when transfers end live in
// a prometheus::Registry; those read at scrape time are built as MetricFamily
// in Collect() (counters still typed counter).
class DaemonMetrics final : public prometheus::Collectable, public engine::TransferRecorder {
 public:
  // Registers itself as `engine`'s transfer recorder. `engine` outlives it.
  // `version` and `started_at` go to build info and process start time;
  // `max_registered_bytes` is regions.max_registered_bytes (0 = no cap), the
  // registry's own limit, which the engine does not report.
  DaemonMetrics(engine::Engine& engine, std::string version, absl::Time started_at,
                uint64_t max_registered_bytes = 0);
  // Unregisters. Destroy it only after Engine::Stop (no transfer may end
  // concurrently with the destructor) and after the endpoint serving it.
  ~DaemonMetrics() override;

  DaemonMetrics(const DaemonMetrics&) = delete;
  DaemonMetrics& operator=(const DaemonMetrics&) = delete;

  // Engine: a transfer ended. A map lookup by peer under a mutex, an atomic
  // add, and for done transfers one histogram observation (prometheus-cpp
  // takes that series' own mutex briefly).
  void RecordTransfer(const engine::TransferInfo& info) override;

  // Every family, computed now, in a fixed order. Any thread (the
  // endpoint's, once per scrape).
  std::vector<prometheus::MetricFamily> Collect() const override;

  // With [cluster]: whether the directory's etcd lease holds, asked at each
  // scrape (main wires it; metrics cannot see the cluster layer). Null, the
  // default, exports no xferd_directory_connected. Clearing it waits for a
  // scrape that is calling it, so what it reads may go once it returns.
  void SetDirectoryProbe(std::function<bool()> connected);

 private:
  // The series one (peer, transport) records into, found once.
  struct PeerSeries {
    std::array<prometheus::Counter*, 3> outcomes{};  // done, failed, cancelled
    prometheus::Histogram* time = nullptr;
  };

  // The series of a (peer, transport), created at zero on first use.
  PeerSeries& SeriesFor(const std::string& peer, transport::TransportKind transport) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CollectEngine(std::vector<prometheus::MetricFamily>* out) const;
  void CollectProcess(std::vector<prometheus::MetricFamily>* out) const;
  void CollectDirectory(std::vector<prometheus::MetricFamily>* out) const;

  engine::Engine& engine_;
  const std::string version_;
  const absl::Time started_at_;
  const uint64_t max_registered_bytes_;
  // The families recorded when transfers end (duplicate names throw: a bug).
  prometheus::Registry registry_{prometheus::Registry::InsertBehavior::Throw};
  prometheus::Family<prometheus::Counter>& transfers_;
  prometheus::Family<prometheus::Histogram>& xfer_time_;

  mutable Mutex mu_;
  // By peer node id, then by transport kind.
  mutable absl::flat_hash_map<std::string, std::array<PeerSeries, 2>> series_ ABSL_GUARDED_BY(mu_);

  // Its own mutex: a scrape holds it while the probe asks the directory,
  // which transfers ending meanwhile need not wait for.
  mutable Mutex probe_mu_;
  std::function<bool()> directory_probe_ ABSL_GUARDED_BY(probe_mu_);
};

}  // namespace xferd::metrics
