// The text exposition format 0.0.4: values, escaping, names, HELP/TYPE lines
// and histogram series, against exact expected text.
#include "daemon/metrics/exposition.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace xferd::metrics {
namespace {

TEST(FormatValueTest, IntegersHaveNoExponentOrFraction) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(-0.0), "0");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(1073741824), "1073741824");
  EXPECT_EQ(FormatValue(999999999999999), "999999999999999");
}

TEST(FormatValueTest, FractionsAreShortestRoundTrip) {
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(0.0001), "0.0001");  // not 1e-04: bucket bounds read as written
  EXPECT_EQ(FormatValue(0.00025), "0.00025");
  EXPECT_EQ(FormatValue(2.5), "2.5");
  EXPECT_EQ(FormatValue(1e-7), "1e-07");
  EXPECT_EQ(FormatValue(1e20), "1e+20");
  EXPECT_EQ(std::stod(FormatValue(0.088824544)), 0.088824544);
  EXPECT_EQ(std::stod(FormatValue(1.0 / 3)), 1.0 / 3);
}

TEST(FormatValueTest, SpecialValues) {
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(EscapeTest, LabelValuesEscapeBackslashQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue("plain node-1.example:7300"), "plain node-1.example:7300");
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("tab\tstays"), "tab\tstays");
}

TEST(EscapeTest, HelpEscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(EscapeHelp("say \"hi\"\\n\nnext"), "say \"hi\"\\\\n\\nnext");
}

TEST(EscapeTest, InvalidUtf8BecomesReplacementCharacter) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(EscapeLabelValue("\xC2\xB5s \xE2\x9C\x93 \xF0\x9F\x9A\x80"),
            "\xC2\xB5s \xE2\x9C\x93 \xF0\x9F\x9A\x80");                        // valid: kept
  EXPECT_EQ(EscapeLabelValue("a\xFFz"), "a" + fffd + "z");                     // stray byte
  EXPECT_EQ(EscapeLabelValue("\xC0\xAF"), fffd + fffd);                        // overlong '/'
  EXPECT_EQ(EscapeLabelValue("\xED\xA0\x80"), fffd + fffd + fffd);             // surrogate
  EXPECT_EQ(EscapeLabelValue("x\xE2\x82"), "x" + fffd + fffd);                 // truncated
  EXPECT_EQ(EscapeLabelValue("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // > U+10FFFF
  EXPECT_EQ(EscapeHelp("\x80\"\n"), fffd + "\"\\n");
}

TEST(NamesTest, MetricAndLabelNames) {
  EXPECT_TRUE(IsValidMetricName("xferd_tx_bytes_total"));
  EXPECT_TRUE(IsValidMetricName("job:rate5m"));
  EXPECT_TRUE(IsValidMetricName("_x"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName("1x"));
  EXPECT_FALSE(IsValidMetricName("x-y"));
  EXPECT_FALSE(IsValidMetricName("x y"));
  EXPECT_TRUE(IsValidLabelName("peer"));
  EXPECT_TRUE(IsValidLabelName("_p2"));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
  EXPECT_FALSE(IsValidLabelName("2x"));
  EXPECT_FALSE(IsValidLabelName(""));
}

TEST(RenderTextTest, CountersAndGaugesWithAndWithoutLabels) {
  FamilySnapshot bytes("xferd_tx_bytes_total", "Bytes sent.\nTo peers \\ by link.",
                       MetricType::kCounter, {"peer", "transport"});
  bytes.Add({"b", "tcp"}, 1048576);
  bytes.Add({"we\"ird\\node\n", "tcp"}, 0.5);
  FamilySnapshot flight("xferd_transfers_in_flight", "Now.", MetricType::kGauge, {});
  flight.Add({}, 3);
  FamilySnapshot empty("xferd_errors_total", "None yet.", MetricType::kCounter, {"code"});
  EXPECT_EQ(RenderText({bytes, flight, empty}),
            "# HELP xferd_tx_bytes_total Bytes sent.\\nTo peers \\\\ by link.\n"
            "# TYPE xferd_tx_bytes_total counter\n"
            "xferd_tx_bytes_total{peer=\"b\",transport=\"tcp\"} 1048576\n"
            "xferd_tx_bytes_total{peer=\"we\\\"ird\\\\node\\n\",transport=\"tcp\"} 0.5\n"
            "# HELP xferd_transfers_in_flight Now.\n"
            "# TYPE xferd_transfers_in_flight gauge\n"
            "xferd_transfers_in_flight 3\n"
            "# HELP xferd_errors_total None yet.\n"
            "# TYPE xferd_errors_total counter\n");
}

TEST(RenderTextTest, HistogramBucketsAreCumulativeAndEndWithInf) {
  FamilySnapshot h("xferd_xfer_time_seconds", "Latency.", MetricType::kHistogram, {"peer"},
                   {0.001, 0.25, 1});
  // Per bucket: 2 in (..0.001], 0 in (0.001, 0.25], 3 in (0.25, 1], 1 above.
  h.AddHistogram({"b"}, {2, 0, 3, 1}, 4.5);
  FamilySnapshot bare("x_seconds", "No labels.", MetricType::kHistogram, {}, {1});
  bare.AddHistogram({}, {0, 0}, 0);
  EXPECT_EQ(RenderText({h, bare}),
            "# HELP xferd_xfer_time_seconds Latency.\n"
            "# TYPE xferd_xfer_time_seconds histogram\n"
            "xferd_xfer_time_seconds_bucket{peer=\"b\",le=\"0.001\"} 2\n"
            "xferd_xfer_time_seconds_bucket{peer=\"b\",le=\"0.25\"} 2\n"
            "xferd_xfer_time_seconds_bucket{peer=\"b\",le=\"1\"} 5\n"
            "xferd_xfer_time_seconds_bucket{peer=\"b\",le=\"+Inf\"} 6\n"
            "xferd_xfer_time_seconds_sum{peer=\"b\"} 4.5\n"
            "xferd_xfer_time_seconds_count{peer=\"b\"} 6\n"
            "# HELP x_seconds No labels.\n"
            "# TYPE x_seconds histogram\n"
            "x_seconds_bucket{le=\"1\"} 0\n"
            "x_seconds_bucket{le=\"+Inf\"} 0\n"
            "x_seconds_sum 0\n"
            "x_seconds_count 0\n");
}

}  // namespace
}  // namespace xferd::metrics
