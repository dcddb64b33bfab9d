// xferctl top's rendering: rates over the daemon's uptime, "+N" deltas, the
// first refresh without rates, peers and transfers in flight, and JSON that
// parses. No daemon: samples are made by hand.
#include "client/cpp/top_view.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace xferd::client {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TopSample Sample(double uptime_s, uint64_t sent, uint64_t received, uint64_t done_bytes) {
  TopSample s;
  s.at = absl::FromUnixSeconds(1700000000) + absl::Seconds(uptime_s);
  s.stats.mutable_uptime()->set_seconds(static_cast<int64_t>(uptime_s));
  s.stats.mutable_uptime()->set_nanos(static_cast<int32_t>((uptime_s - int64_t(uptime_s)) * 1e9));
  s.stats.set_transport(v1::TRANSPORT_KIND_TCP);
  s.stats.set_bytes_sent(sent);
  s.stats.set_bytes_received(received);
  s.stats.set_transfers_in_flight(3);
  s.stats.set_transfers_done(10);
  s.stats.set_peers(1);
  v1::Peer* peer = s.peers.add_peers();
  peer->set_node_id("b");
  peer->set_transport(v1::TRANSPORT_KIND_TCP);
  peer->set_state(v1::Peer::STATE_CONNECTED);
  peer->set_lanes(2);
  peer->set_bytes_sent(sent);
  peer->set_bytes_received(received);
  v1::Transfer* t = s.transfers.add_transfers();
  t->set_id(42);
  t->set_peer("b");
  t->set_dst_region("dst");
  t->set_state(v1::TRANSFER_STATE_RUNNING);
  t->set_length(64 * kMiB);
  t->set_bytes_done(done_bytes);
  t->mutable_submitted_at()->set_seconds(1700000000);
  t->set_priority(v1::PRIORITY_BULK);
  v1::PriorityStats* bulk = s.stats.add_priorities();
  bulk->set_priority(v1::PRIORITY_BULK);
  bulk->set_submitted(13);
  bulk->set_in_flight(3);
  bulk->set_done(done_bytes / (4 * kMiB));
  bulk->mutable_mean_queue_wait()->set_nanos(310000);
  s.stats.add_priorities()->set_priority(v1::PRIORITY_CRITICAL);  // ran nothing: not shown
  return s;
}

v1::NodeInfo Node() {
  v1::NodeInfo node;
  node.set_node_id("a");
  return node;
}

TEST(TopViewTest, RatesComeFromTheDaemonsUptime) {
  const TopSample before = Sample(10, 100 * kMiB, 0, 16 * kMiB);
  const TopSample after = Sample(12, 300 * kMiB, 2 * kMiB, 48 * kMiB);
  const TopRates rates = RatesBetween(&before, after);
  EXPECT_DOUBLE_EQ(rates.seconds, 2);
  EXPECT_DOUBLE_EQ(rates.tx_bytes_per_second, 100.0 * kMiB);
  EXPECT_DOUBLE_EQ(rates.rx_bytes_per_second, 1.0 * kMiB);
  EXPECT_LT(RatesBetween(nullptr, after).seconds, 0);
  EXPECT_LT(RatesBetween(&after, before).seconds, 0);  // uptime went back: a restart
}

TEST(TopViewTest, FirstRefreshHasNoRatesLaterOnesDo) {
  TopSample before = Sample(10, 100 * kMiB, 0, 16 * kMiB);
  TopSample after = Sample(12, 300 * kMiB, 0, 48 * kMiB);
  (*after.stats.mutable_errors())["UNAVAILABLE"] = 2;
  after.stats.set_transfers_done(14);
  TopOptions options;
  options.max_transfers = 1;
  const std::string first = RenderTopText(Node(), before, nullptr, options);
  EXPECT_TRUE(absl::StartsWith(first, "xferd a (tcp)  up 10.00s  every 1.00s  ")) << first;
  EXPECT_TRUE(absl::StrContains(first, "throughput  out -, in -\n")) << first;
  EXPECT_TRUE(absl::StrContains(first, "errors      none\n")) << first;
  EXPECT_TRUE(absl::StrContains(first, "3 in flight, 10 done, 0 failed")) << first;

  const std::string next = RenderTopText(Node(), after, &before, options);
  EXPECT_TRUE(absl::StrContains(next, "throughput  out 104.9 MB/s, in 0 B/s\n")) << next;
  EXPECT_TRUE(absl::StrContains(next, "14 done (+4), 0 failed (+0)")) << next;
  EXPECT_TRUE(absl::StrContains(next, "errors      UNAVAILABLE 2 (+2)\n")) << next;
  // The peer's row with its own rates, and the transfer's progress and rate.
  EXPECT_TRUE(absl::StrContains(next, "connected  tcp")) << next;
  EXPECT_TRUE(absl::StrContains(next, "104.9 MB/s  0 B/s")) << next;
  EXPECT_TRUE(absl::StrContains(next, "42  b     dst+0        bulk   running")) << next;
  EXPECT_TRUE(absl::StrContains(next, "classes     bulk 3 in flight, 12 done (+8), wait 310us\n"))
      << next;
  EXPECT_TRUE(absl::StrContains(next, "75.0%  48.00 MiB / 64.00 MiB  16.8 MB/s")) << next;
  // One row shown of three in flight.
  EXPECT_TRUE(absl::StrContains(next, "... and 2 more in flight\n")) << next;
}

TEST(TopViewTest, EmptyDaemon) {
  TopSample s = Sample(1, 0, 0, 0);
  s.peers.clear_peers();
  s.transfers.clear_transfers();
  s.stats.set_transfers_in_flight(0);
  const std::string text = RenderTopText(Node(), s, nullptr, {});
  EXPECT_TRUE(absl::StrContains(text, "\nno peers\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "\nno transfers in flight\n")) << text;
}

TEST(TopViewTest, JsonIsOneDocumentWithNullsForUnknownRates) {
  TopSample before = Sample(10, 100 * kMiB, 0, 16 * kMiB);
  TopSample after = Sample(12, 300 * kMiB, 0, 48 * kMiB);
  v1::NodeInfo node = Node();
  node.set_node_id("a \"quoted\"\nnode");  // escaped, not broken
  const TopSample* const previous_samples[] = {nullptr, &before};
  for (const TopSample* previous : previous_samples) {
    absl::StatusOr<std::string> json = RenderTopJson(node, after, previous);
    ASSERT_TRUE(json.ok()) << json.status();
    EXPECT_EQ(json->find('\n'), std::string::npos);
    google::protobuf::Struct doc;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &doc).ok()) << *json;
    const auto& f = doc.fields();
    EXPECT_EQ(f.at("node_id").string_value(), node.node_id());
    EXPECT_EQ(f.at("stats").struct_value().fields().at("bytes_sent").string_value(),
              std::to_string(300 * kMiB));
    EXPECT_EQ(f.at("peers").list_value().values_size(), 1);
    EXPECT_EQ(f.at("transfers").list_value().values_size(), 1);
    if (previous == nullptr) {
      EXPECT_TRUE(f.at("tx_bytes_per_second").has_null_value()) << *json;
    } else {
      EXPECT_DOUBLE_EQ(f.at("tx_bytes_per_second").number_value(), 100.0 * kMiB);
      EXPECT_DOUBLE_EQ(f.at("transfer_rates").struct_value().fields().at("42").number_value(),
                       16.0 * kMiB);
    }
  }
}

}  // namespace
}  // namespace xferd::client
