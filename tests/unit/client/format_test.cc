#include "client/cpp/format.h"

#include <gtest/gtest.h>

namespace xferd::client {
namespace {

TEST(EnumLabelTest, StripsPrefixAndLowercases) {
  EXPECT_EQ(EnumLabel("TRANSFER_STATE_DONE", "TRANSFER_STATE_"), "done");
  EXPECT_EQ(EnumLabel("OTHER_THING", "TRANSFER_STATE_"), "other_thing");
  EXPECT_EQ(TransportLabel(v1::TRANSPORT_KIND_TCP), "tcp");
  EXPECT_EQ(TransportLabel(v1::TRANSPORT_KIND_VERBS), "verbs");
  EXPECT_EQ(StateLabel(v1::TRANSFER_STATE_RUNNING), "running");
  EXPECT_EQ(PeerStateLabel(v1::Peer::STATE_BROKEN), "broken");
  EXPECT_EQ(BackingLabel(v1::REGION_BACKING_SHM), "shm");
  EXPECT_EQ(EventKindLabel(v1::RegionEvent::KIND_LANDED), "landed");
}

TEST(AccessLabelTest, ReadThenWrite) {
  v1::RegionAccess access;
  EXPECT_EQ(AccessLabel(access), "-");
  access.set_remote_write(true);
  EXPECT_EQ(AccessLabel(access), "w");
  access.set_remote_read(true);
  EXPECT_EQ(AccessLabel(access), "rw");
  access.set_remote_write(false);
  EXPECT_EQ(AccessLabel(access), "r");
}

TEST(PercentTest, NeverShowsAPartialTransferAsComplete) {
  EXPECT_EQ(Percent(0, 0), "-");
  EXPECT_EQ(Percent(0, 10), "0.0%");
  EXPECT_EQ(Percent(1, 3), "33.3%");
  EXPECT_EQ(Percent(9999, 10000), "99.9%");
  EXPECT_EQ(Percent(10000, 10000), "100.0%");
}

TEST(FormatElapsedTest, PicksAUnitForEachScale) {
  EXPECT_EQ(FormatElapsed(absl::Microseconds(850)), "850us");
  EXPECT_EQ(FormatElapsed(absl::Microseconds(12345)), "12.3ms");
  EXPECT_EQ(FormatElapsed(absl::Milliseconds(4560)), "4.56s");
  EXPECT_EQ(FormatElapsed(absl::Seconds(187)), "3m07s");
  EXPECT_EQ(FormatElapsed(absl::Minutes(125)), "2h05m");
}

TEST(FormatTimestampTest, UnsetIsADash) {
  EXPECT_EQ(FormatTimestamp(google::protobuf::Timestamp()), "-");
  google::protobuf::Timestamp t;
  t.set_seconds(1700000000);
  t.set_nanos(5);
  EXPECT_EQ(ToTime(t), absl::FromUnixSeconds(1700000000) + absl::Nanoseconds(5));
  EXPECT_EQ(FormatTimestamp(t).size(), std::string("2023-11-14 22:13:20").size());
}

TEST(ErrorLabelTest, CodeNameAndMessage) {
  EXPECT_EQ(ErrorLabel(v1::Error()), "");
  v1::Error error;
  error.set_code(14);
  error.set_message("peer went away");
  EXPECT_EQ(ErrorLabel(error), "UNAVAILABLE: peer went away");
}

v1::Transfer Finished(uint64_t length, uint64_t done, absl::Duration took) {
  v1::Transfer t;
  t.set_id(7);
  t.set_length(length);
  t.set_bytes_done(done);
  t.set_transport(v1::TRANSPORT_KIND_TCP);
  t.set_state(done == length ? v1::TRANSFER_STATE_DONE : v1::TRANSFER_STATE_FAILED);
  t.mutable_submitted_at()->set_seconds(100);
  const absl::Duration end = absl::Seconds(100) + took;
  t.mutable_finished_at()->set_seconds(absl::ToInt64Seconds(end));
  t.mutable_finished_at()->set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(end % absl::Seconds(1))));
  return t;
}

TEST(WriteSummaryTest, BytesElapsedThroughputAndTransport) {
  EXPECT_EQ(WriteSummary(Finished(2 << 20, 2 << 20, absl::Milliseconds(500)), absl::Hours(1)),
            "wrote 2.00 MiB in 500.0ms (4.2 MB/s) over tcp: transfer 7 done");
  EXPECT_EQ(WriteSummary(Finished(4096, 1024, absl::Seconds(2)), absl::Hours(1)),
            "wrote 1.00 KiB of 4.00 KiB in 2.00s (512 B/s) over tcp: transfer 7 failed");
}

TEST(WriteSummaryTest, ReadsAndManyBlocksSaySo) {
  v1::Transfer t = Finished(4 << 20, 4 << 20, absl::Seconds(1));
  t.set_blocks(256);
  EXPECT_EQ(WriteSummary(t, absl::Hours(1)),
            "wrote 4.00 MiB (256 blocks) in 1.00s (4.2 MB/s) over tcp: transfer 7 done");
  t.set_direction(v1::Transfer::DIRECTION_READ);
  t.set_blocks(1);
  EXPECT_EQ(WriteSummary(t, absl::Hours(1)),
            "read 4.00 MiB in 1.00s (4.2 MB/s) over tcp: transfer 7 done");
}

TEST(WriteSummaryTest, FallsBackToTheMeasuredTime) {
  v1::Transfer t = Finished(1000, 1000, absl::ZeroDuration());
  t.clear_finished_at();
  EXPECT_EQ(WriteSummary(t, absl::Seconds(1)),
            "wrote 1000 B in 1.00s (1.0 kB/s) over tcp: transfer 7 done");
  EXPECT_EQ(WriteSummary(t, absl::ZeroDuration()),
            "wrote 1000 B in 0us (-) over tcp: transfer 7 done");
}

TEST(TableTest, AlignsColumnsWithoutTrailingSpaces) {
  Table table({{"ID", true}, {"NAME"}, {"SIZE", true}, {"NOTE"}});
  table.AddRow({"7", "src", "1.00 MiB", ""});
  table.AddRow({"12", "destination", "10 B"});  // short row: padded
  EXPECT_EQ(table.Render(),
            "ID  NAME             SIZE  NOTE\n"
            " 7  src          1.00 MiB\n"
            "12  destination      10 B\n");
}

TEST(TableTest, HeadersOnlyWhenNamed) {
  Table table({{""}, {""}});
  table.AddRow({"a", "b"});
  EXPECT_EQ(table.Render(), "a  b\n");
  EXPECT_EQ(Table({{"X"}}).Render(), "X\n");
}

TEST(KeyValuesTest, AlignsValues) {
  EXPECT_EQ(KeyValues({{"node", "a"}, {"transport", "tcp"}}),
            "node       a\n"
            "transport  tcp\n");
}

TEST(ToJsonTest, ProtoNamesEnumNamesAndDefaults) {
  v1::Transfer t;
  t.set_id(3);
  t.set_state(v1::TRANSFER_STATE_DONE);
  t.set_transport(v1::TRANSPORT_KIND_TCP);
  absl::StatusOr<std::string> json = ToJson(t);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->find('\n'), std::string::npos);
  EXPECT_NE(json->find("\"id\":\"3\""), std::string::npos) << *json;
  EXPECT_NE(json->find("\"state\":\"TRANSFER_STATE_DONE\""), std::string::npos) << *json;
  EXPECT_NE(json->find("\"transport\":\"TRANSPORT_KIND_TCP\""), std::string::npos) << *json;
  EXPECT_NE(json->find("\"bytes_done\":\"0\""), std::string::npos) << *json;
  EXPECT_NE(json->find("\"src_region\":\"\""), std::string::npos) << *json;
}

}  // namespace
}  // namespace xferd::client
