// xferd's metric families over two in-process engines (fake transport),
// rendered by prometheus-cpp's text serializer: transfers by outcome, latency
// histograms, errors by code, traffic by peer, peer states, and that every
// family is documented.
#include "daemon/metrics/daemon_metrics.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/unit/engine/engine_harness.h"

namespace xferd::testing {
namespace {

using engine::TransferState;
using metrics::DaemonMetrics;

std::string Render(const DaemonMetrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.Collect());
}

// `name{labels}` with the labels sorted, so that series compare whatever
// order the serializer wrote their labels in. Label values here hold no
// commas.
std::string Series(const std::string& name, std::vector<std::string> labels = {}) {
  if (labels.empty()) return name;
  std::sort(labels.begin(), labels.end());
  return absl::StrCat(name, "{", absl::StrJoin(labels, ","), "}");
}

// Sample lines of an exposition (Series(...) -> value); comments skipped.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    const std::string series = line.substr(0, space);
    const size_t brace = series.find('{');
    const std::string key =
        brace == std::string::npos
            ? series
            : Series(series.substr(0, brace),
                     absl::StrSplit(series.substr(brace + 1, series.size() - brace - 2), ','));
    out[key] = std::stod(line.substr(space + 1));
  }
  return out;
}

class DaemonMetricsTest : public TwoEngineTest {
 protected:
  static constexpr uint64_t kCap = uint64_t{3} << 30;  // a's regions.max_registered_bytes
  static constexpr uint32_t kInFlight = 77;  // engine.max_inflight_transfers, not the default

  DaemonMetricsTest()
      : TwoEngineTest([] {
          EngineConfig config;
          config.max_inflight_transfers = kInFlight;
          return config;
        }()) {}

  void SetUp() override {
    TwoEngineTest::SetUp();
    a_metrics_ = std::make_unique<DaemonMetrics>(*a_->engine, "9.9.9", absl::Now(), kCap);
    b_metrics_ = std::make_unique<DaemonMetrics>(*b_->engine, "9.9.9", absl::Now());
  }
  void TearDown() override {
    for (Node* n : {a_, b_}) n->engine->Stop();
    a_metrics_.reset();
    b_metrics_.reset();
  }

  std::unique_ptr<DaemonMetrics> a_metrics_, b_metrics_;
};

TEST_F(DaemonMetricsTest, TransfersByOutcomeLatencyAndErrors) {
  for (uint64_t length : {4096u, 1u << 20}) {
    EXPECT_EQ(h_.Wait((*h_.Submit(*a_, {Spec("src", "b", "dst", length)}))[0]).state,
              TransferState::kDone);
  }
  const std::string peer = "peer=\"b\"", tcp = "transport=\"tcp\"";
  const std::string tx = Series("xferd_tx_bytes_total", {peer, tcp});
  constexpr double kDoneBytes = 4096 + (1 << 20);
  // Checked before the held writes below: a poller may post a held write's
  // slice before it is cancelled or failed, and the peer's acknowledgement of
  // it, released later, counts too.
  EXPECT_EQ(Samples(Render(*a_metrics_)).at(tx), kDoneBytes);
  a_->transport->HoldCompletions(true);
  auto cancelled = (*h_.Submit(*a_, {Spec("src", "b", "dst", 4096)}))[0];
  ASSERT_TRUE(a_->engine->CancelTransfer(cancelled->id()).ok());
  // Into other bytes of dst: the two may land at once, on two pollers.
  auto failed = (*h_.Submit(*a_, {Spec("src", "b", "dst", 4096, 0, /*dst_offset=*/4096)}))[0];
  EXPECT_EQ(a_->engine->FailAll(absl::UnavailableError("peer went away")), 1u);
  a_->transport->HoldCompletions(false);
  EXPECT_EQ(h_.Wait(failed).state, TransferState::kFailed);
  EXPECT_EQ(h_.Wait(cancelled).state, TransferState::kCancelled);

  const std::map<std::string, double> s = Samples(Render(*a_metrics_));
  EXPECT_EQ(s.at(Series("xferd_transfers_total", {peer, tcp, "outcome=\"done\""})), 2);
  EXPECT_EQ(s.at(Series("xferd_transfers_total", {peer, tcp, "outcome=\"cancelled\""})), 1);
  EXPECT_EQ(s.at(Series("xferd_transfers_total", {peer, tcp, "outcome=\"failed\""})), 1);
  EXPECT_EQ(s.at(Series("xferd_errors_total", {"code=\"CANCELLED\""})), 1);
  EXPECT_EQ(s.at(Series("xferd_errors_total", {"code=\"UNAVAILABLE\""})), 1);
  // Only done transfers are timed; every one falls in some bucket.
  EXPECT_EQ(s.at(Series("xferd_xfer_time_seconds_count", {peer, tcp})), 2);
  EXPECT_EQ(s.at(Series("xferd_xfer_time_seconds_bucket", {peer, tcp, "le=\"+Inf\""})), 2);
  EXPECT_GT(s.at(Series("xferd_xfer_time_seconds_sum", {peer, tcp})), 0);
  EXPECT_LE(s.at(Series("xferd_xfer_time_seconds_bucket", {peer, tcp, "le=\"0.0001\""})),
            s.at(Series("xferd_xfer_time_seconds_bucket", {peer, tcp, "le=\"100\""})));
  EXPECT_GE(s.at(tx), kDoneBytes);
  EXPECT_LE(s.at(tx), kDoneBytes + 2 * 4096);
  EXPECT_EQ(s.at("xferd_transfers_submitted_total"), 4);
  EXPECT_EQ(s.at("xferd_transfers_in_flight"), 0);
  // All four were normal: the class's series say the same, the others 0.
  const std::string normal = "priority=\"normal\"";
  EXPECT_EQ(s.at(Series("xferd_priority_submitted_total", {normal})), 4);
  EXPECT_EQ(s.at(Series("xferd_priority_transfers_total", {"outcome=\"done\"", normal})), 2);
  EXPECT_EQ(s.at(Series("xferd_priority_transfers_total", {"outcome=\"failed\"", normal})), 1);
  EXPECT_EQ(s.at(Series("xferd_priority_transfers_total", {"outcome=\"cancelled\"", normal})), 1);
  EXPECT_EQ(s.at(Series("xferd_priority_in_flight", {normal})), 0);
  EXPECT_EQ(s.at(Series("xferd_priority_bytes_total", {normal})), kDoneBytes);
  // The two done were posted; the held ones may have been before they ended.
  EXPECT_GE(s.at(Series("xferd_priority_started_total", {normal})), 2);
  EXPECT_GT(s.at(Series("xferd_priority_queue_wait_seconds_total", {normal})), 0);
  EXPECT_EQ(s.at(Series("xferd_priority_submitted_total", {"priority=\"critical\""})), 0);
  // Without [tenants] every transfer and region is the default tenant's.
  const std::string tenant = "tenant=\"default\"";
  EXPECT_EQ(s.at(Series("xferd_tenant_submitted_total", {tenant})), 4);
  EXPECT_EQ(s.at(Series("xferd_tenant_bytes_total", {tenant})), kDoneBytes);
  EXPECT_EQ(s.at(Series("xferd_tenant_in_flight", {tenant})), 0);
  EXPECT_EQ(s.at(Series("xferd_tenant_registered_bytes", {tenant})), 1 << 20);
  EXPECT_EQ(s.at(Series("xferd_tenant_max_registered_bytes", {tenant})), 0);
  EXPECT_EQ(s.at(Series("xferd_tenant_refused_total", {"reason=\"quota\"", tenant})), 0);
  // Its queue waits are the class's: every transfer was the default's.
  EXPECT_EQ(s.at(Series("xferd_tenant_started_total", {tenant})),
            s.at(Series("xferd_priority_started_total", {normal})));
  EXPECT_EQ(s.at(Series("xferd_tenant_queue_wait_seconds_total", {tenant})),
            s.at(Series("xferd_priority_queue_wait_seconds_total", {normal})));
  EXPECT_EQ(s.at("xferd_memory_registered_bytes"), 1 << 20);
  EXPECT_EQ(s.at("xferd_memory_regions"), 1);
  EXPECT_EQ(s.at(Series("xferd_peers", {"state=\"connected\""})), 1);
  EXPECT_EQ(s.at(Series("xferd_peers", {"state=\"broken\""})), 0);
  EXPECT_EQ(s.at(Series("xferd_build_info", {"version=\"9.9.9\"", tcp})), 1);
  EXPECT_EQ(s.count(Series("xferd_poller_sleep_seconds_total", {"poller=\"1\""})), 1u);
  EXPECT_EQ(s.count(Series("xferd_poller_sleeping", {"poller=\"0\""})), 1u);
  EXPECT_GT(s.at("process_resident_memory_bytes"), 0);
  EXPECT_GT(s.at("process_open_fds"), 0);
  EXPECT_GT(s.at("process_threads"), 1);
}

TEST_F(DaemonMetricsTest, ReceiverSeesLandedEventsAndZeroSeriesForNewPeers) {
  EXPECT_EQ(h_.Wait((*h_.Submit(*a_, {Spec("src", "b", "dst", 8192)}))[0]).state,
            TransferState::kDone);
  const std::map<std::string, double> s = Samples(Render(*b_metrics_));
  EXPECT_EQ(s.at("xferd_landed_events_total"), 1);
  // b never wrote to a, yet a's series exist at zero from its first contact.
  const std::string peer = "peer=\"a\"", tcp = "transport=\"tcp\"";
  EXPECT_EQ(s.at(Series("xferd_transfers_total", {peer, tcp, "outcome=\"failed\""})), 0);
  EXPECT_EQ(s.at(Series("xferd_xfer_time_seconds_count", {peer, tcp})), 0);
  EXPECT_EQ(s.at(Series("xferd_tx_bytes_total", {peer, tcp})), 0);
}

TEST_F(DaemonMetricsTest, CapsAreTheConfiguredOnes) {
  const std::map<std::string, double> a = Samples(Render(*a_metrics_));
  EXPECT_EQ(a.at("xferd_memory_registered_bytes_max"), static_cast<double>(kCap));
  EXPECT_EQ(a.at("xferd_memory_registered_bytes"), 1 << 20);  // src
  EXPECT_EQ(a.at("xferd_transfers_in_flight_max"), kInFlight);
  // No cap is exported as 0 (the alert ignores it).
  EXPECT_EQ(Samples(Render(*b_metrics_)).at("xferd_memory_registered_bytes_max"), 0);
}

TEST_F(DaemonMetricsTest, DirectoryStateIsAskedAtEachScrapeOnlyOnceWired) {
  EXPECT_EQ(Samples(Render(*a_metrics_)).count("xferd_directory_connected"), 0u);
  std::atomic<bool> connected{true};
  std::atomic<int> asked{0};
  a_metrics_->SetDirectoryProbe([&] {
    ++asked;
    return connected.load();
  });
  EXPECT_EQ(Samples(Render(*a_metrics_)).at("xferd_directory_connected"), 1);
  connected = false;
  EXPECT_EQ(Samples(Render(*a_metrics_)).at("xferd_directory_connected"), 0);
  EXPECT_EQ(asked.load(), 2);
  a_metrics_->SetDirectoryProbe(nullptr);
  EXPECT_EQ(Samples(Render(*a_metrics_)).count("xferd_directory_connected"), 0u);
  EXPECT_EQ(asked.load(), 2);
}

TEST_F(DaemonMetricsTest, EveryFamilyHasHelpAndATypeAndUniqueName) {
  const std::string text = Render(*a_metrics_);
  std::set<std::string> names;
  for (const prometheus::MetricFamily& f : a_metrics_->Collect()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_GT(f.help.size(), 10u) << f.name;
    // prometheus-cpp writes HELP text as is: it must need no escaping.
    EXPECT_EQ(f.help.find_first_of("\\\n"), std::string::npos) << f.name;
    EXPECT_TRUE(absl::StartsWith(f.name, "xferd_") || absl::StartsWith(f.name, "process_"))
        << f.name;
    EXPECT_TRUE(absl::StrContains(text, "# HELP " + f.name + " ")) << f.name;
    EXPECT_TRUE(absl::StrContains(text, "# TYPE " + f.name + " ")) << f.name;
    if (f.type == prometheus::MetricType::Counter) {
      EXPECT_TRUE(absl::EndsWith(f.name, "_total")) << f.name;
    }
  }
  EXPECT_GE(names.size(), 25u);
}

TEST_F(DaemonMetricsTest, LatencyBucketsAreTheDocumentedOnes) {
  EXPECT_EQ(h_.Wait((*h_.Submit(*a_, {Spec("src", "b", "dst", 4096)}))[0]).state,
            TransferState::kDone);
  for (const prometheus::MetricFamily& f : a_metrics_->Collect()) {
    if (f.name != "xferd_xfer_time_seconds") continue;
    ASSERT_EQ(f.type, prometheus::MetricType::Histogram);
    ASSERT_EQ(f.metric.size(), 1u);
    std::vector<double> bounds;
    for (const auto& bucket : f.metric[0].histogram.bucket) bounds.push_back(bucket.upper_bound);
    ASSERT_FALSE(bounds.empty());
    EXPECT_TRUE(std::isinf(bounds.back()));
    bounds.pop_back();
    EXPECT_EQ(bounds, metrics::TransferTimeBuckets());
    EXPECT_EQ(f.metric[0].histogram.sample_count, 1u);
    return;
  }
  ADD_FAILURE() << "no xferd_xfer_time_seconds";
}

TEST(TransferTimeBucketsTest, From100MicrosecondsTo100SecondsByOneTwoAndAHalfFive) {
  const std::vector<double> b = metrics::TransferTimeBuckets();
  ASSERT_EQ(b.size(), 19u);  // 6 decades of 3, and 100
  EXPECT_DOUBLE_EQ(b.front(), 1e-4);
  EXPECT_DOUBLE_EQ(b.back(), 100);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  for (size_t i = 0; i + 3 < b.size(); ++i) EXPECT_DOUBLE_EQ(b[i + 3], b[i] * 10) << i;
}

}  // namespace
}  // namespace xferd::testing
