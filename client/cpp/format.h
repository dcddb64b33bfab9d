// Renderings shared by xferctl's commands: lowercase labels for the proto
// enums, aligned tables, times and durations, the one-line summary of a
// finished write, and JSON (proto field names, defaults printed). Pure
// functions: safe from any thread, no I/O.
#pragma once

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "xferd/v1/xferd.pb.h"

namespace xferd::client {

// "TRANSFER_STATE_DONE" with prefix "TRANSFER_STATE_" -> "done". A name
// without the prefix is only lowercased.
std::string EnumLabel(absl::string_view enum_name, absl::string_view prefix);

std::string TransportLabel(v1::TransportKind kind);      // "tcp", "verbs"
std::string StateLabel(v1::TransferState state);         // "running", "done"
std::string PeerStateLabel(v1::Peer::State state);       // "connected"
std::string BackingLabel(v1::RegionBacking backing);     // "shm"
std::string EventKindLabel(v1::RegionEvent::Kind kind);  // "landed"
std::string PriorityLabel(v1::Priority priority);        // "critical"; "normal" if unset
// Remote access as "rw", "w", "r" or "-".
std::string AccessLabel(const v1::RegionAccess& access);

// "45.0%"; "100.0%" only when done == total; "-" when total is 0.
std::string Percent(uint64_t done, uint64_t total);

// Local time "2024-05-01 12:34:56", or "-" if unset.
std::string FormatTimestamp(const google::protobuf::Timestamp& time);
absl::Time ToTime(const google::protobuf::Timestamp& time);
absl::Duration ToDuration(const google::protobuf::Duration& duration);
// "850us", "12.3ms", "4.56s", "3m07s", "2h05m".
std::string FormatElapsed(absl::Duration elapsed);

// The error of a FAILED or CANCELLED item as "CODE: message" ("" if none).
std::string ErrorLabel(const v1::Error& error);

// Last line of `xferctl write` and `read`: bytes (and blocks), elapsed,
// throughput and transport, e.g. "wrote 2.00 MiB in 15.2ms (138.0 MB/s) over
// tcp: transfer 7 done", "read 4.00 MiB (256 blocks) in 3.1ms ...".
// Elapsed is the daemon's submitted..finished time when both are set,
// otherwise `measured`.
std::string WriteSummary(const v1::Transfer& transfer, absl::Duration measured);

// Columns of text, each as wide as its widest cell, separated by two spaces;
// right-aligned columns suit numbers. Headers are skipped when all are empty.
// Not thread-safe: one thread fills and renders it.
class Table {
 public:
  struct Column {
    std::string header;
    bool right_aligned = false;
  };
  explicit Table(std::vector<Column> columns);
  // A row with fewer cells than columns is padded with empty cells.
  void AddRow(std::vector<std::string> cells);
  // One line per row (and the header), each ending in '\n', without
  // trailing spaces.
  std::string Render() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// "key   value" lines with the values aligned.
std::string KeyValues(const std::vector<std::pair<std::string, std::string>>& rows);

// One-line JSON with proto field names and every field printed (defaults
// too, so scripts need no fallbacks). Errors: INTERNAL (unprintable message).
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);

}  // namespace xferd::client
