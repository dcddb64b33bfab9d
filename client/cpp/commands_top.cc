// xferctl top: a live view of the daemon, refreshed every --interval. On a
// terminal each refresh redraws the screen; otherwise (a pipe, a file) the
// refreshes follow one another as plain text frames separated by a blank
// line, and with --json each is one JSON document on its own line.
// --iterations N stops after N refreshes (scripts, tests); 0 runs until
// interrupted.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "daemon/base/status_macros.h"
#include "client/cpp/commands.h"
#include "client/cpp/top_view.h"

namespace xferd::client {
namespace {

// Home the cursor and clear the screen (ANSI); only on a terminal.
constexpr char kClearScreen[] = "\x1b[H\x1b[2J";
// Below this a refresh costs the daemon more than it tells anyone.
constexpr absl::Duration kMinInterval = absl::Milliseconds(10);

struct TopArgs {
  int64_t interval_ns = absl::ToInt64Nanoseconds(absl::Seconds(1));
  uint64_t iterations = 0;  // 0: until interrupted
  uint32_t transfers = 10;
};

absl::StatusOr<TopSample> TakeSample(Client& client, uint32_t max_transfers) {
  TopSample sample;
  ASSIGN_OR_RETURN(sample.stats, client.GetStats());
  sample.at = absl::Now();
  ASSIGN_OR_RETURN(sample.peers, client.ListPeers());
  v1::ListTransfersRequest in_flight;
  in_flight.set_limit(max_transfers);
  ASSIGN_OR_RETURN(sample.transfers, client.ListTransfers(in_flight));
  return sample;
}

absl::Status RunTop(Client& client, const GlobalOptions& global, const TopArgs& args) {
  const absl::Duration interval = absl::Nanoseconds(args.interval_ns);
  if (interval < kMinInterval) {
    return absl::InvalidArgumentError("--interval must be at least 10ms");
  }
  ASSIGN_OR_RETURN(const v1::NodeInfo node, client.GetNodeInfo());
  const bool terminal = !global.json && ::isatty(STDOUT_FILENO) == 1;
  TopOptions options;
  options.interval = interval;
  options.max_transfers = args.transfers;
  std::optional<TopSample> previous;
  for (uint64_t i = 0; args.iterations == 0 || i < args.iterations; ++i) {
    if (i > 0) absl::SleepFor(interval);
    ASSIGN_OR_RETURN(TopSample now, TakeSample(client, args.transfers));
    const TopSample* before = previous ? &*previous : nullptr;
    std::string frame;
    if (global.json) {
      ASSIGN_OR_RETURN(frame, RenderTopJson(node, now, before));
      frame += "\n";
    } else {
      frame = RenderTopText(node, now, before, options);
      if (terminal) {
        frame = kClearScreen + frame;
      } else if (i > 0) {
        frame = "\n" + frame;
      }
    }
    std::fputs(frame.c_str(), stdout);
    std::fflush(stdout);
    previous = std::move(now);
  }
  return absl::OkStatus();
}

}  // namespace

void AddTopCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<TopArgs>();
  CLI::App* top =
      AddCommand(app, "top", "live view: throughput, transfers in flight, peers, errors (like top)",
                 action, [args](Client& client, const GlobalOptions& global) {
                   return RunTop(client, global, *args);
                 });
  top->add_option("-i,--interval", args->interval_ns, "time between refreshes (default 1s)")
      ->transform(DurationArg());
  top->add_option("-n,--iterations", args->iterations,
                  "stop after this many refreshes (default 0: until interrupted)")
      ->check(CLI::NonNegativeNumber);
  top->add_option("--transfers", args->transfers, "transfers in flight shown at most (default 10)");
}

}  // namespace xferd::client
