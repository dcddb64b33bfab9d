#include "daemon/metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace xferd::metrics {

uint64_t AtomicDouble::ToBits(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

double AtomicDouble::FromBits(uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

void AtomicDouble::Add(double delta) {
  uint64_t old_bits = bits_.load(std::memory_order_relaxed);
  while (!bits_.compare_exchange_weak(old_bits, ToBits(FromBits(old_bits) + delta),
                                      std::memory_order_relaxed)) {
  }
}

void Counter::Increment(double by) {
  XFERD_DCHECK(by >= 0);
  if (by > 0) value_.Add(by);
}

Histogram::Histogram(const std::vector<double>& bounds)
    : bounds_(bounds), counts_(new std::atomic<uint64_t>[bounds.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  // The first bucket whose upper bound holds the value (le is inclusive).
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.Add(value);
}

HistogramSample Histogram::Snapshot(LabelValues labels) const {
  HistogramSample out;
  out.labels = std::move(labels);
  out.counts.resize(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    out.counts[i] = counts_[i].load(std::memory_order_relaxed);
  }
  out.sum = sum_.Get();
  return out;
}

std::vector<double> DecadeBuckets(double min, double max) {
  XFERD_CHECK(min > 0 && max >= min);
  std::vector<double> bounds;
  // Decades by their exponent, so the bounds are exact decimal values
  // (1e-4 * 2.5 would not be 0.00025 to the last bit).
  const int first = static_cast<int>(std::lround(std::log10(min)));
  const int last = static_cast<int>(std::lround(std::log10(max)));
  for (int exponent = first; exponent <= last; ++exponent) {
    for (double step : {1.0, 2.5, 5.0}) {
      const double bound =
          exponent < 0 ? step / std::pow(10.0, -exponent) : step * std::pow(10.0, exponent);
      if (bound > max * (1 + 1e-9)) break;
      bounds.push_back(bound);
    }
  }
  return bounds;
}

void Registry::CheckNames(const std::string& name, const std::vector<std::string>& label_names,
                          bool histogram) {
  XFERD_CHECK(IsValidMetricName(name));
  XFERD_CHECK(std::find(names_.begin(), names_.end(), name) == names_.end());
  std::set<std::string> seen;
  for (const std::string& label : label_names) {
    XFERD_CHECK(IsValidLabelName(label));
    XFERD_CHECK(seen.insert(label).second);
    XFERD_CHECK(!histogram || label != "le");
  }
  names_.push_back(name);
}

template <typename Metric>
Family<Metric>& Registry::Install(std::unique_ptr<Family<Metric>> family) {
  MutexLock lock(&mu_);
  CheckNames(family->name(), family->label_names(), std::is_same_v<Metric, Histogram>);
  Family<Metric>* raw = family.get();
  owned_.push_back(std::move(family));
  sources_.push_back([raw](std::vector<FamilySnapshot>* out) { out->push_back(raw->Snapshot()); });
  return *raw;
}

CounterFamily& Registry::AddCounter(std::string name, std::string help,
                                    std::vector<std::string> label_names) {
  return Install(std::make_unique<CounterFamily>(std::move(name), std::move(help),
                                                 MetricType::kCounter, std::move(label_names)));
}

GaugeFamily& Registry::AddGauge(std::string name, std::string help,
                                std::vector<std::string> label_names) {
  return Install(std::make_unique<GaugeFamily>(std::move(name), std::move(help), MetricType::kGauge,
                                               std::move(label_names)));
}

HistogramFamily& Registry::AddHistogram(std::string name, std::string help,
                                        std::vector<std::string> label_names,
                                        std::vector<double> bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    XFERD_CHECK(std::isfinite(bounds[i]));
    XFERD_CHECK(i == 0 || bounds[i - 1] < bounds[i]);
  }
  return Install(std::make_unique<HistogramFamily>(std::move(name), std::move(help),
                                                   MetricType::kHistogram, std::move(label_names),
                                                   std::move(bounds)));
}

void Registry::AddCollector(Collector collect) {
  MutexLock lock(&mu_);
  sources_.push_back(std::move(collect));
}

std::vector<FamilySnapshot> Registry::Collect() const {
  std::vector<Collector> sources;
  {
    MutexLock lock(&mu_);
    sources = sources_;
  }
  // Outside the lock: collectors read other components' state.
  std::vector<FamilySnapshot> out;
  for (const Collector& source : sources) source(&out);
#ifndef NDEBUG
  std::set<std::string> names;
  for (const FamilySnapshot& f : out) XFERD_CHECK(names.insert(f.name).second);
#endif
  return out;
}

std::string Registry::Render() const { return RenderText(Collect()); }

}  // namespace xferd::metrics
