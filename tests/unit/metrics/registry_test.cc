// Counters, gauges, histograms and families: values, label handling,
// bucket bounds, registry order and name checks, and exact totals under
// concurrent updates, series creation and scrapes.
#include "daemon/metrics/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace xferd::metrics {
namespace {

TEST(RegistryTest, CountersAndGaugesKeepValuesPerLabelSet) {
  Registry registry;
  CounterFamily& transfers = registry.AddCounter("t_total", "Transfers.", {"peer", "outcome"});
  Counter& b_done = transfers.WithLabels({"b", "done"});
  EXPECT_EQ(&b_done, &transfers.WithLabels({"b", "done"}));  // found again, same series
  b_done.Increment();
  b_done.Increment(2);
  transfers.WithLabels({"a", "failed"}).Increment(0.5);
  GaugeFamily& gauge = registry.AddGauge("g", "A gauge.");
  gauge.WithLabels({}).Set(7);
  gauge.WithLabels({}).Add(-9.5);
  EXPECT_EQ(b_done.value(), 3);
  EXPECT_EQ(gauge.WithLabels({}).value(), -2.5);
  // Series sorted by label values; families in registration order.
  EXPECT_EQ(registry.Render(),
            "# HELP t_total Transfers.\n# TYPE t_total counter\n"
            "t_total{peer=\"a\",outcome=\"failed\"} 0.5\n"
            "t_total{peer=\"b\",outcome=\"done\"} 3\n"
            "# HELP g A gauge.\n# TYPE g gauge\ng -2.5\n");
}

TEST(RegistryTest, HistogramUpperBoundsAreInclusive) {
  Registry registry;
  HistogramFamily& family = registry.AddHistogram("h_seconds", "H.", {}, {1, 2});
  Histogram& h = family.WithLabels({});
  for (double v : {0.5, 1.0, 1.5, 2.0, 3.0, -1.0}) h.Observe(v);
  const HistogramSample s = h.Snapshot({});
  EXPECT_EQ(s.counts, (std::vector<uint64_t>{3, 2, 1}));  // -1, 0.5, 1 | 1.5, 2 | 3
  EXPECT_EQ(s.sum, 7);
  EXPECT_NE(registry.Render().find("h_seconds_bucket{le=\"1\"} 3\n"
                                   "h_seconds_bucket{le=\"2\"} 5\n"
                                   "h_seconds_bucket{le=\"+Inf\"} 6\n"
                                   "h_seconds_sum 7\n"
                                   "h_seconds_count 6\n"),
            std::string::npos);
}

TEST(RegistryTest, DecadeBucketsFrom100usTo100s) {
  const std::vector<double> bounds = DecadeBuckets(1e-4, 100);
  std::vector<std::string> rendered;
  for (double b : bounds) rendered.push_back(FormatValue(b));
  EXPECT_EQ(rendered, (std::vector<std::string>{"0.0001", "0.00025", "0.0005", "0.001", "0.0025",
                                                "0.005", "0.01", "0.025", "0.05", "0.1", "0.25",
                                                "0.5", "1", "2.5", "5", "10", "25", "50", "100"}));
  EXPECT_EQ(DecadeBuckets(1, 1), (std::vector<double>{1}));
}

TEST(RegistryTest, CollectorsRunAtEveryScrapeInOrder) {
  Registry registry;
  int scrapes = 0;
  registry.AddCollector([&](std::vector<FamilySnapshot>* out) {
    FamilySnapshot f("first", "Collected.", MetricType::kGauge, {});
    f.Add({}, ++scrapes);
    out->push_back(std::move(f));
  });
  registry.AddCounter("second_total", "Owned.").WithLabels({}).Increment();
  std::vector<FamilySnapshot> families = registry.Collect();
  ASSERT_EQ(families.size(), 2u);
  EXPECT_EQ(families[0].name, "first");
  EXPECT_EQ(families[1].name, "second_total");
  EXPECT_EQ(families[0].samples[0].value, 1);
  EXPECT_EQ(registry.Collect()[0].samples[0].value, 2);
}

// XFERD_CHECK aborts (its message goes to spdlog's default logger, stdout).
TEST(RegistryDeathTest, BadOrDuplicateNamesAreBugs) {
  Registry registry;
  registry.AddCounter("x_total", "X.");
  EXPECT_DEATH(registry.AddCounter("x_total", "Again."), "");
  EXPECT_DEATH(registry.AddGauge("bad-name", "B."), "");
  EXPECT_DEATH(registry.AddGauge("g", "G.", {"__reserved"}), "");
  EXPECT_DEATH(registry.AddGauge("g", "G.", {"peer", "peer"}), "");
  EXPECT_DEATH(registry.AddHistogram("h", "H.", {"le"}, {1}), "");
  EXPECT_DEATH(registry.AddHistogram("h", "H.", {}, {2, 1}), "");
  CounterFamily& labelled = registry.AddCounter("y_total", "Y.", {"peer"});
  EXPECT_DEATH(labelled.WithLabels({"a", "b"}), "");
}

// Writers update shared and per-thread series (creating them as they go)
// while a reader scrapes: every increment is counted exactly once, and no
// scrape ever sees a counter go down.
TEST(RegistryTest, ConcurrentUpdatesAndScrapesAreExact) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  Registry registry;
  CounterFamily& counters = registry.AddCounter("c_total", "C.", {"peer"});
  HistogramFamily& histograms =
      registry.AddHistogram("h_seconds", "H.", {"peer"}, DecadeBuckets(1e-4, 100));
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    double last = 0;
    while (!done.load()) {
      for (const FamilySnapshot& f : registry.Collect()) {
        if (f.name != "c_total") continue;
        for (const Sample& s : f.samples) {
          if (s.labels[0] != "shared") continue;
          EXPECT_GE(s.value, last);
          last = s.value;
        }
      }
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        counters.WithLabels({"shared"}).Increment();
        counters.WithLabels({"peer-" + std::to_string(t % 3)}).Increment();
        histograms.WithLabels({"shared"}).Observe(0.001 * (i % 7));
      }
    });
  }
  for (std::thread& w : writers) w.join();
  done.store(true);
  scraper.join();
  EXPECT_EQ(counters.WithLabels({"shared"}).value(), kThreads * kPerThread);
  double per_peer = 0;
  for (int p = 0; p < 3; ++p)
    per_peer += counters.WithLabels({"peer-" + std::to_string(p)}).value();
  EXPECT_EQ(per_peer, kThreads * kPerThread);
  const HistogramSample h = histograms.WithLabels({"shared"}).Snapshot({});
  uint64_t count = 0;
  for (uint64_t c : h.counts) count += c;
  EXPECT_EQ(count, static_cast<uint64_t>(kThreads) * kPerThread);
  double sum = 0;
  for (int i = 0; i < kPerThread; ++i) sum += 0.001 * (i % 7);
  EXPECT_NEAR(h.sum, kThreads * sum, 1e-6);
}

}  // namespace
}  // namespace xferd::metrics
