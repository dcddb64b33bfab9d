// What `xferctl top` shows of a daemon at each refresh: throughput in and out
// over the last interval, each priority class's transfers, transfers in
// flight with their class and progress, peers with
// their state, transport, bytes and rates, errors and resources. Rendered as
// text (a screen for a terminal, or plain frames for a pipe) or as one JSON
// document. Pure functions over samples the command takes: no I/O, any thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "xferd/v1/xferd.pb.h"

namespace xferd::client {

// One refresh's view of the daemon.
struct TopSample {
  absl::Time at;  // when it was taken (for the header)
  v1::Stats stats;
  v1::ListPeersResponse peers;
  v1::ListTransfersResponse transfers;  // those in flight, newest first
};

struct TopOptions {
  // The refresh interval, shown in the header.
  absl::Duration interval = absl::Seconds(1);
  // Rows of transfers in flight shown at most (the rest are counted).
  uint32_t max_transfers = 10;
};

// Rates over the interval between two samples, from the daemon's own uptime
// (so the client's scheduling does not skew them). Unknown (negative) without
// a previous sample or when the daemon restarted in between.
struct TopRates {
  double seconds = -1;
  double tx_bytes_per_second = -1;
  double rx_bytes_per_second = -1;
};
TopRates RatesBetween(const TopSample* previous, const TopSample& now);

// The text of one refresh, lines ending in '\n'. `previous` (may be null)
// gives rates and "+N" deltas; the first refresh shows "-" instead.
std::string RenderTopText(const v1::NodeInfo& node, const TopSample& now, const TopSample* previous,
                          const TopOptions& options);

// One JSON document on one line: time, node, interval rates (null when
// unknown), per-peer rates, and the daemon's Stats, Peers and Transfers as
// `xferctl stats|peers|transfers --json` print them. Errors: INTERNAL.
absl::StatusOr<std::string> RenderTopJson(const v1::NodeInfo& node, const TopSample& now,
                                          const TopSample* previous);

}  // namespace xferd::client
