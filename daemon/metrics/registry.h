// A small Prometheus client: counters, gauges and histograms with labels,
// grouped in families, kept in a registry that renders the text exposition
// (exposition.h). Updating a series is lock-free (atomics); finding a series
// by its label values takes the family's mutex, so callers on busy paths keep
// the returned reference. Collectors add families computed at scrape time
// from state kept elsewhere (the engine's counters).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "daemon/common/check.h"
#include "daemon/common/mutex.h"
#include "daemon/metrics/exposition.h"

namespace xferd::metrics {

// A double that threads add to and read without a lock.
class AtomicDouble {
 public:
  void Add(double delta);
  void Set(double value) { bits_.store(ToBits(value), std::memory_order_relaxed); }
  double Get() const { return FromBits(bits_.load(std::memory_order_relaxed)); }

 private:
  static uint64_t ToBits(double value);
  static double FromBits(uint64_t bits);
  std::atomic<uint64_t> bits_{0};  // 0 is the bit pattern of +0.0
};

// Goes only up (resets with the process). Any thread.
class Counter {
 public:
  // `by` must be >= 0 (a negative one is a bug: it is ignored, and checked
  // in debug builds).
  void Increment(double by = 1);
  double value() const { return value_.Get(); }

 private:
  AtomicDouble value_;
};

// Goes up and down. Any thread.
class Gauge {
 public:
  void Set(double value) { value_.Set(value); }
  void Add(double delta) { value_.Add(delta); }
  double value() const { return value_.Get(); }

 private:
  AtomicDouble value_;
};

// Counts observations into buckets with fixed upper bounds. Any thread.
class Histogram {
 public:
  // `bounds` (finite, strictly increasing) outlives the histogram.
  explicit Histogram(const std::vector<double>& bounds);
  void Observe(double value);
  // Per-bucket counts (not cumulative, +Inf last) and the sum. A snapshot
  // taken during Observe may hold the new count without its sum.
  HistogramSample Snapshot(LabelValues labels) const;

 private:
  const std::vector<double>& bounds_;
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1
  AtomicDouble sum_;
};

// Bounds 1, 2.5, 5 per decade from `min` to `max` inclusive (powers of ten),
// e.g. 1e-4 .. 100 for latencies from 100 us to 100 s.
std::vector<double> DecadeBuckets(double min, double max);

// The series of one metric, one per combination of label values.
template <typename Metric>
class Family {
 public:
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         std::vector<double> bounds = {})
      : name_(std::move(name)),
        help_(std::move(help)),
        type_(type),
        label_names_(std::move(label_names)),
        bounds_(std::move(bounds)) {}

  // The series with these label values (as many as the family has label
  // names), created at zero on first use. The reference stays valid as long
  // as the family. Thread-safe.
  Metric& WithLabels(const LabelValues& values) {
    XFERD_CHECK(values.size() == label_names_.size());
    MutexLock lock(&mu_);
    std::unique_ptr<Metric>& slot = series_[values];
    if (slot == nullptr) {
      if constexpr (std::is_same_v<Metric, Histogram>) {
        slot = std::make_unique<Histogram>(bounds_);
      } else {
        slot = std::make_unique<Metric>();
      }
    }
    return *slot;
  }

  // Every series, sorted by label values. Thread-safe.
  FamilySnapshot Snapshot() const {
    FamilySnapshot out(name_, help_, type_, label_names_, bounds_);
    MutexLock lock(&mu_);
    for (const auto& [labels, metric] : series_) {
      if constexpr (std::is_same_v<Metric, Histogram>) {
        out.histograms.push_back(metric->Snapshot(labels));
      } else {
        out.Add(labels, metric->value());
      }
    }
    return out;
  }

  const std::string& name() const { return name_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

 private:
  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
  const std::vector<double> bounds_;
  mutable Mutex mu_;
  std::map<LabelValues, std::unique_ptr<Metric>> series_ ABSL_GUARDED_BY(mu_);
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

// Families in registration order. Names are checked when added: an invalid
// or duplicate metric or label name is a bug and aborts (XFERD_CHECK).
// Thread-safe; families live as long as the registry.
class Registry {
 public:
  // Appends the families it computes, at every scrape.
  using Collector = std::function<void(std::vector<FamilySnapshot>* out)>;

  CounterFamily& AddCounter(std::string name, std::string help,
                            std::vector<std::string> label_names = {});
  GaugeFamily& AddGauge(std::string name, std::string help,
                        std::vector<std::string> label_names = {});
  // `bounds`: finite and strictly increasing; +Inf is implicit.
  HistogramFamily& AddHistogram(std::string name, std::string help,
                                std::vector<std::string> label_names, std::vector<double> bounds);
  // Collected in order with the families added before and after it. The
  // names of the families it makes must be unique too (checked when
  // collected, in debug builds).
  void AddCollector(Collector collect);

  // Snapshots of every family, in order.
  std::vector<FamilySnapshot> Collect() const;
  // RenderText(Collect()).
  std::string Render() const;

 private:
  template <typename Metric>
  Family<Metric>& Install(std::unique_ptr<Family<Metric>> family);
  void CheckNames(const std::string& name, const std::vector<std::string>& label_names,
                  bool histogram) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  // The families added (of any metric type).
  std::vector<std::shared_ptr<void>> owned_ ABSL_GUARDED_BY(mu_);
  // Every family and collector, in order, as a function that appends snapshots.
  std::vector<Collector> sources_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xferd::metrics
