// Prometheus text exposition format 0.0.4: the snapshot of a metric family
// (what a scrape sees) and its rendering, with the format's escaping rules.
// Pure functions and plain data: safe from any thread, no I/O. The registry
// (registry.h) produces snapshots; collectors may build them directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace xferd::metrics {

// The Content-Type of RenderText's output.
inline constexpr char kTextContentType[] = "text/plain; version=0.0.4; charset=utf-8";

enum class MetricType { kCounter, kGauge, kHistogram };

// Label values of one series, in the order of its family's label names.
using LabelValues = std::vector<std::string>;

struct Sample {
  LabelValues labels;
  double value = 0;
};

struct HistogramSample {
  LabelValues labels;
  // Observations per bucket, NOT cumulative: counts[i] fell in
  // (bounds[i-1], bounds[i]]; the last entry is the +Inf bucket, so
  // counts.size() == bounds.size() + 1. Rendering accumulates them.
  std::vector<uint64_t> counts;
  double sum = 0;
};

// One metric family at scrape time. Not thread-safe (plain data).
struct FamilySnapshot {
  FamilySnapshot(std::string name, std::string help, MetricType type,
                 std::vector<std::string> label_names, std::vector<double> bounds = {});

  // Appends a counter or gauge series; `labels` matches label_names.
  void Add(LabelValues labels, double value);
  // Appends a histogram series; `counts` has bounds.size() + 1 entries.
  void AddHistogram(LabelValues labels, std::vector<uint64_t> counts, double sum);

  std::string name;
  std::string help;
  MetricType type;
  std::vector<std::string> label_names;
  std::vector<double> bounds;  // histograms: finite upper bounds, increasing
  std::vector<Sample> samples;
  std::vector<HistogramSample> histograms;
};

// The exposition of `families` in order, each with its HELP and TYPE lines
// and its series in the order given. Histograms render cumulative
// _bucket{le=...} series ending in le="+Inf", then _sum and _count (equal
// to the +Inf bucket). Invalid UTF-8 in help or label values is replaced by
// U+FFFD, so the output is always valid UTF-8 (names are checked ASCII).
std::string RenderText(const std::vector<FamilySnapshot>& families);

// A sample value as the format wants it: integers without exponent or
// fraction ("42"), other values in their shortest round-trip form ("0.25",
// "1e-07"), and "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);

// Escaping of the format: label values escape backslash, double quote and
// line feed; HELP text escapes backslash and line feed.
std::string EscapeLabelValue(absl::string_view value);
std::string EscapeHelp(absl::string_view help);

// [a-zA-Z_:][a-zA-Z0-9_:]* for metric names; [a-zA-Z_][a-zA-Z0-9_]*, not
// starting with "__" (reserved), for label names.
bool IsValidMetricName(absl::string_view name);
bool IsValidLabelName(absl::string_view name);

}  // namespace xferd::metrics
