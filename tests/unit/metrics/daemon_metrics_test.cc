// xferd's metric families over two in-process engines (fake transport):
// transfers by outcome, latency histograms, errors by code, traffic by
// peer, peer states, and that every family is documented.
#include "daemon/metrics/daemon_metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <tuple>

#include "absl/strings/match.h"
#include "tests/unit/engine/engine_harness.h"

namespace xferd::testing {
namespace {

using engine::TransferState;
using metrics::DaemonMetrics;

// Sample lines of an exposition ("name{labels}" -> value); comments skipped.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

class DaemonMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::tie(a_, b_) = h_.AddConnectedPair();
    a_metrics_ = std::make_unique<DaemonMetrics>(*a_->engine, "9.9.9", absl::Now());
    b_metrics_ = std::make_unique<DaemonMetrics>(*b_->engine, "9.9.9", absl::Now());
  }
  void TearDown() override {
    for (Node* n : {a_, b_}) n->engine->Stop();
    a_metrics_.reset();
    b_metrics_.reset();
  }

  EngineHarness h_;
  Node* a_ = nullptr;
  Node* b_ = nullptr;
  std::unique_ptr<DaemonMetrics> a_metrics_, b_metrics_;
};

TEST_F(DaemonMetricsTest, TransfersByOutcomeLatencyAndErrors) {
  for (uint64_t length : {4096u, 1u << 20}) {
    EXPECT_EQ(h_.Wait((*h_.Submit(*a_, {Spec("src", "b", "dst", length)}))[0]).state,
              TransferState::kDone);
  }
  a_->transport->HoldCompletions(true);
  auto cancelled = (*h_.Submit(*a_, {Spec("src", "b", "dst", 4096)}))[0];
  ASSERT_TRUE(a_->engine->CancelTransfer(cancelled->id()).ok());
  auto failed = (*h_.Submit(*a_, {Spec("src", "b", "dst", 4096)}))[0];
  EXPECT_EQ(a_->engine->FailAll(absl::UnavailableError("peer went away")), 1u);
  a_->transport->HoldCompletions(false);
  EXPECT_EQ(h_.Wait(failed).state, TransferState::kFailed);

  const std::map<std::string, double> s = Samples(a_metrics_->Render());
  const std::string peer = "peer=\"b\",transport=\"tcp\"";
  EXPECT_EQ(s.at("xferd_transfers_total{" + peer + ",outcome=\"done\"}"), 2);
  EXPECT_EQ(s.at("xferd_transfers_total{" + peer + ",outcome=\"cancelled\"}"), 1);
  EXPECT_EQ(s.at("xferd_transfers_total{" + peer + ",outcome=\"failed\"}"), 1);
  EXPECT_EQ(s.at("xferd_errors_total{code=\"CANCELLED\"}"), 1);
  EXPECT_EQ(s.at("xferd_errors_total{code=\"UNAVAILABLE\"}"), 1);
  // Only done transfers are timed; every one falls in some bucket.
  EXPECT_EQ(s.at("xferd_xfer_time_seconds_count{" + peer + "}"), 2);
  EXPECT_EQ(s.at("xferd_xfer_time_seconds_bucket{" + peer + ",le=\"+Inf\"}"), 2);
  EXPECT_GT(s.at("xferd_xfer_time_seconds_sum{" + peer + "}"), 0);
  EXPECT_LE(s.at("xferd_xfer_time_seconds_bucket{" + peer + ",le=\"0.0001\"}"),
            s.at("xferd_xfer_time_seconds_bucket{" + peer + ",le=\"100\"}"));
  EXPECT_EQ(s.at("xferd_tx_bytes_total{" + peer + "}"), 4096 + (1 << 20));
  EXPECT_EQ(s.at("xferd_transfers_submitted_total"), 4);
  EXPECT_EQ(s.at("xferd_transfers_in_flight"), 0);
  EXPECT_EQ(s.at("xferd_memory_registered_bytes"), 1 << 20);
  EXPECT_EQ(s.at("xferd_memory_regions"), 1);
  EXPECT_EQ(s.at("xferd_peers{state=\"connected\"}"), 1);
  EXPECT_EQ(s.at("xferd_peers{state=\"broken\"}"), 0);
  EXPECT_EQ(s.at("xferd_build_info{version=\"9.9.9\",transport=\"tcp\"}"), 1);
  EXPECT_EQ(s.count("xferd_poller_sleep_seconds_total{poller=\"1\"}"), 1u);
  EXPECT_EQ(s.count("xferd_poller_sleeping{poller=\"0\"}"), 1u);
  EXPECT_GT(s.at("process_resident_memory_bytes"), 0);
  EXPECT_GT(s.at("process_open_fds"), 0);
  EXPECT_GT(s.at("process_threads"), 1);
}

TEST_F(DaemonMetricsTest, ReceiverSeesLandedEventsAndZeroSeriesForNewPeers) {
  EXPECT_EQ(h_.Wait((*h_.Submit(*a_, {Spec("src", "b", "dst", 8192)}))[0]).state,
            TransferState::kDone);
  const std::map<std::string, double> s = Samples(b_metrics_->Render());
  EXPECT_EQ(s.at("xferd_landed_events_total"), 1);
  // b never wrote to a, yet a's series exist at zero from its first contact.
  EXPECT_EQ(s.at("xferd_transfers_total{peer=\"a\",transport=\"tcp\",outcome=\"failed\"}"), 0);
  EXPECT_EQ(s.at("xferd_xfer_time_seconds_count{peer=\"a\",transport=\"tcp\"}"), 0);
  EXPECT_EQ(s.at("xferd_tx_bytes_total{peer=\"a\",transport=\"tcp\"}"), 0);
}

TEST_F(DaemonMetricsTest, EveryFamilyHasHelpAndATypeAndUniqueName) {
  const std::string text = a_metrics_->Render();
  std::set<std::string> names;
  for (const metrics::FamilySnapshot& f : a_metrics_->registry().Collect()) {
    EXPECT_TRUE(names.insert(f.name).second) << f.name;
    EXPECT_GT(f.help.size(), 10u) << f.name;
    EXPECT_TRUE(absl::StartsWith(f.name, "xferd_") || absl::StartsWith(f.name, "process_"))
        << f.name;
    EXPECT_TRUE(absl::StrContains(text, "# HELP " + f.name + " ")) << f.name;
    EXPECT_TRUE(absl::StrContains(text, "# TYPE " + f.name + " ")) << f.name;
    if (f.type == metrics::MetricType::kCounter) {
      EXPECT_TRUE(absl::EndsWith(f.name, "_total")) << f.name;
    }
  }
  EXPECT_GE(names.size(), 25u);
}

TEST(TransferTimeBucketsTest, From100MicrosecondsTo100Seconds) {
  const std::vector<double> b = metrics::TransferTimeBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_DOUBLE_EQ(b.front(), 1e-4);
  EXPECT_DOUBLE_EQ(b.back(), 100);
}

}  // namespace
}  // namespace xferd::testing
