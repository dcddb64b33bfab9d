#include "daemon/metrics/exposition.h"

#include <charconv>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/check.h"

namespace xferd::metrics {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at the start of `s`, or 0 if it is not
// one (overlong forms, surrogates and code points above U+10FFFF included).
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t len;
  uint32_t min, cp;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, min = 0x80, cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, min = 0x800, cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (s.size() < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

// Appends `text` with invalid UTF-8 replaced and each character passed
// through `escape` (which appends it, escaped or not).
template <typename Escape>
void AppendEscaped(std::string& out, absl::string_view text, Escape escape) {
  while (!text.empty()) {
    const size_t len = Utf8SequenceLength(text);
    if (len == 0) {
      out += kReplacement;
      text.remove_prefix(1);
    } else if (len == 1) {
      escape(out, text[0]);
      text.remove_prefix(1);
    } else {
      out.append(text.data(), len);
      text.remove_prefix(len);
    }
  }
}

void AppendHelpChar(std::string& out, char c) {
  if (c == '\\') {
    out += "\\\\";
  } else if (c == '\n') {
    out += "\\n";
  } else {
    out += c;
  }
}

void AppendLabelValueChar(std::string& out, char c) {
  if (c == '"') {
    out += "\\\"";
  } else {
    AppendHelpChar(out, c);
  }
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// `{a="x",b="y"}` for the family's labels plus an optional extra one (the
// histogram's `le`); nothing when there are no labels at all.
void AppendLabels(std::string& out, const std::vector<std::string>& names,
                  const LabelValues& values, absl::string_view extra_name = {},
                  absl::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return;
  out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    absl::StrAppend(&out, names[i], "=\"");
    AppendEscaped(out, values[i], AppendLabelValueChar);
    out += '"';
  }
  if (!extra_name.empty()) {
    absl::StrAppend(&out, names.empty() ? "" : ",", extra_name, "=\"", extra_value, "\"");
  }
  out += '}';
}

void AppendLine(std::string& out, absl::string_view name, absl::string_view suffix,
                const std::vector<std::string>& label_names, const LabelValues& labels,
                const std::string& value, absl::string_view extra_name = {},
                absl::string_view extra_value = {}) {
  absl::StrAppend(&out, name, suffix);
  AppendLabels(out, label_names, labels, extra_name, extra_value);
  absl::StrAppend(&out, " ", value, "\n");
}

void AppendHistogram(std::string& out, const FamilySnapshot& f, const HistogramSample& h) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < f.bounds.size(); ++i) {
    cumulative += h.counts[i];
    AppendLine(out, f.name, "_bucket", f.label_names, h.labels, absl::StrCat(cumulative), "le",
               FormatValue(f.bounds[i]));
  }
  cumulative += h.counts.back();
  AppendLine(out, f.name, "_bucket", f.label_names, h.labels, absl::StrCat(cumulative), "le",
             "+Inf");
  AppendLine(out, f.name, "_sum", f.label_names, h.labels, FormatValue(h.sum));
  AppendLine(out, f.name, "_count", f.label_names, h.labels, absl::StrCat(cumulative));
}

bool IsNameChar(char c, bool first, bool colon) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return alpha || (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

bool IsValidName(absl::string_view name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i], i == 0, colon)) return false;
  }
  return true;
}

}  // namespace

FamilySnapshot::FamilySnapshot(std::string name, std::string help, MetricType type,
                               std::vector<std::string> label_names, std::vector<double> bounds)
    : name(std::move(name)),
      help(std::move(help)),
      type(type),
      label_names(std::move(label_names)),
      bounds(std::move(bounds)) {}

void FamilySnapshot::Add(LabelValues labels, double value) {
  XFERD_DCHECK(type != MetricType::kHistogram && labels.size() == label_names.size());
  samples.push_back(Sample{std::move(labels), value});
}

void FamilySnapshot::AddHistogram(LabelValues labels, std::vector<uint64_t> counts, double sum) {
  XFERD_DCHECK(type == MetricType::kHistogram && labels.size() == label_names.size());
  XFERD_DCHECK(counts.size() == bounds.size() + 1);
  histograms.push_back(HistogramSample{std::move(labels), std::move(counts), sum});
}

std::string RenderText(const std::vector<FamilySnapshot>& families) {
  std::string out;
  for (const FamilySnapshot& f : families) {
    absl::StrAppend(&out, "# HELP ", f.name, " ");
    AppendEscaped(out, f.help, AppendHelpChar);
    absl::StrAppend(&out, "\n# TYPE ", f.name, " ", TypeName(f.type), "\n");
    for (const Sample& s : f.samples) {
      AppendLine(out, f.name, "", f.label_names, s.labels, FormatValue(s.value));
    }
    for (const HistogramSample& h : f.histograms) AppendHistogram(out, f, h);
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  const double magnitude = std::fabs(value);
  // Integers (counts, bytes) print as such; 1e15 < 2^53 keeps them exact.
  if (magnitude < 1e15 && value == std::trunc(value)) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buf[64];
  // Shortest round-trip digits: fixed notation where it stays short (bucket
  // bounds such as 0.0001 read better than 1e-04), else the shorter form.
  const std::chars_format format =
      magnitude >= 1e-6 && magnitude < 1e15 ? std::chars_format::fixed : std::chars_format::general;
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), value, format);
  XFERD_CHECK(r.ec == std::errc());
  return std::string(buf, r.ptr);
}

std::string EscapeLabelValue(absl::string_view value) {
  std::string out;
  AppendEscaped(out, value, AppendLabelValueChar);
  return out;
}

std::string EscapeHelp(absl::string_view help) {
  std::string out;
  AppendEscaped(out, help, AppendHelpChar);
  return out;
}

bool IsValidMetricName(absl::string_view name) { return IsValidName(name, /*colon=*/true); }

bool IsValidLabelName(absl::string_view name) {
  return IsValidName(name, /*colon=*/false) && name.substr(0, 2) != "__";
}

}  // namespace xferd::metrics
