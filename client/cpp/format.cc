#include "client/cpp/format.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/base/units.h"

namespace xferd::client {

std::string EnumLabel(absl::string_view enum_name, absl::string_view prefix) {
  absl::string_view label = enum_name;
  if (absl::StartsWith(label, prefix)) label.remove_prefix(prefix.size());
  return absl::AsciiStrToLower(label);
}

std::string TransportLabel(v1::TransportKind kind) {
  return EnumLabel(v1::TransportKind_Name(kind), "TRANSPORT_KIND_");
}

std::string StateLabel(v1::TransferState state) {
  return EnumLabel(v1::TransferState_Name(state), "TRANSFER_STATE_");
}

std::string PeerStateLabel(v1::Peer::State state) {
  return EnumLabel(v1::Peer::State_Name(state), "STATE_");
}

std::string BackingLabel(v1::RegionBacking backing) {
  return EnumLabel(v1::RegionBacking_Name(backing), "REGION_BACKING_");
}

std::string EventKindLabel(v1::RegionEvent::Kind kind) {
  return EnumLabel(v1::RegionEvent::Kind_Name(kind), "KIND_");
}

std::string AccessLabel(const v1::RegionAccess& access) {
  if (!access.remote_read() && !access.remote_write()) return "-";
  return absl::StrCat(access.remote_read() ? "r" : "", access.remote_write() ? "w" : "");
}

std::string Percent(uint64_t done, uint64_t total) {
  if (total == 0) return "-";
  // Rounded down: a partial transfer never shows 100.0%.
  return absl::StrFormat("%.1f%%", std::floor(1000.0 * static_cast<double>(done) / total) / 10);
}

absl::Time ToTime(const google::protobuf::Timestamp& time) {
  return absl::FromUnixSeconds(time.seconds()) + absl::Nanoseconds(time.nanos());
}

absl::Duration ToDuration(const google::protobuf::Duration& duration) {
  return absl::Seconds(duration.seconds()) + absl::Nanoseconds(duration.nanos());
}

std::string FormatTimestamp(const google::protobuf::Timestamp& time) {
  if (time.seconds() == 0 && time.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", ToTime(time), absl::LocalTimeZone());
}

std::string FormatElapsed(absl::Duration elapsed) {
  const double us = absl::ToDoubleMicroseconds(elapsed);
  if (us < 1000) return absl::StrFormat("%.0fus", us);
  if (us < 1e6) return absl::StrFormat("%.1fms", us / 1e3);
  if (us < 60e6) return absl::StrFormat("%.2fs", us / 1e6);
  const int64_t seconds = absl::ToInt64Seconds(elapsed);
  if (seconds < 3600) return absl::StrFormat("%dm%02ds", seconds / 60, seconds % 60);
  return absl::StrFormat("%dh%02dm", seconds / 3600, seconds % 3600 / 60);
}

std::string PriorityLabel(v1::Priority priority) {
  if (priority == v1::PRIORITY_UNSPECIFIED) return "normal";  // the daemon's default
  const std::string name = v1::Priority_Name(priority);
  if (name.empty()) return absl::StrCat("unknown (", static_cast<int>(priority), ")");
  return EnumLabel(name, "PRIORITY_");
}

std::string ErrorLabel(const v1::Error& error) {
  if (error.code() == 0) return "";
  return absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(error.code())), ": ",
                      error.message());
}

std::string WriteSummary(const v1::Transfer& t, absl::Duration measured) {
  absl::Duration elapsed = measured;
  if (t.has_submitted_at() && t.has_finished_at()) {
    elapsed = ToTime(t.finished_at()) - ToTime(t.submitted_at());
  }
  const double seconds = absl::ToDoubleSeconds(elapsed);
  const std::string rate =
      seconds > 0 ? FormatRate(static_cast<double>(t.bytes_done()) / seconds) : "-";
  // A transfer that stopped early says how much of it was written.
  const std::string amount =
      t.bytes_done() == t.length()
          ? FormatBytes(t.bytes_done())
          : absl::StrCat(FormatBytes(t.bytes_done()), " of ", FormatBytes(t.length()));
  const bool read = t.direction() == v1::Transfer::DIRECTION_READ;
  const std::string blocks = t.blocks() > 1 ? absl::StrCat(" (", t.blocks(), " blocks)") : "";
  return absl::StrCat(read ? "read " : "wrote ", amount, blocks, " in ", FormatElapsed(elapsed),
                      " (", rate, ") over ", TransportLabel(t.transport()), ": transfer ", t.id(),
                      " ", StateLabel(t.state()));
}

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  const bool headers = std::any_of(columns_.begin(), columns_.end(),
                                   [](const Column& c) { return !c.header.empty(); });
  std::vector<size_t> widths(columns_.size(), 0);
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (headers) widths[c] = columns_[c].header.size();
    for (const auto& row : rows_) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  auto render_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(widths[c] - cells[c].size(), ' ');
      if (c > 0) line += "  ";
      line += columns_[c].right_aligned ? pad + cells[c] : cells[c] + pad;
    }
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  };
  if (headers) {
    std::vector<std::string> header_cells;
    for (const Column& c : columns_) header_cells.push_back(c.header);
    render_row(header_cells);
  }
  for (const auto& row : rows_) render_row(row);
  return out;
}

std::string KeyValues(const std::vector<std::pair<std::string, std::string>>& rows) {
  Table table({{""}, {""}});
  for (const auto& [key, value] : rows) table.AddRow({key, value});
  return table.Render();
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print ", message.GetTypeName(), " as JSON: ", status.ToString()));
  }
  return json;
}

}  // namespace xferd::client
