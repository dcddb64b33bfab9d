// xferctl's subcommands: each commands_*.cc registers its own on the CLI11
// app, and the one the command line chose leaves its work as an Action that
// main runs once the client is connected. Also the output helpers every
// command shares (JSON or human text on stdout).
#pragma once

#include <google/protobuf/message.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "client/cpp/xferd_client.h"

namespace xferd::client {

struct GlobalOptions {
  std::string target;
  // Machine-readable output: one JSON document per command on stdout.
  bool json = false;
  // mTLS to a daemon's TCP address (PEM files; unused for unix: targets).
  std::string tls_ca, tls_cert, tls_key;
};

// The work of the chosen subcommand. Its status decides the exit code:
// OK -> 0; otherwise main prints "xferctl: <CODE>: <message>" and exits 1.
using Action = std::function<absl::Status(Client& client, const GlobalOptions& global)>;

// The default daemon address: the packaged daemon's unix socket.
inline constexpr char kDefaultTarget[] = "unix:/run/xferd/xferd.sock";

// Sets up xferctl's whole command line on `app`: the global options (bound
// to `*global`, also accepted after a subcommand) and every subcommand.
// Both pointers are owned by the caller and outlive the app. Main thread.
void ConfigureApp(CLI::App& app, GlobalOptions* global, Action* action);

// Each registers its subcommands on `app`. Parsing runs the chosen one's
// callback, which stores its work in `*action` (owned by the caller, which
// outlives the app). Main thread only.
void AddNodeCommands(CLI::App& app, Action* action);    // info, stats, devices
void AddRegionCommands(CLI::App& app, Action* action);  // regions ...
void AddPeerCommands(CLI::App& app, Action* action);    // peers ...
void AddTransferCommands(CLI::App& app,
                         Action* action);               // write, read, transfers, transfer, cancel
void AddLayoutCommands(CLI::App& app, Action* action);  // layouts ...
void AddTopCommand(CLI::App& app, Action* action);      // top

// Adds subcommand `name` to `parent`; when the command line chooses it,
// `run` becomes the action. Returns the subcommand for its options.
CLI::App* AddCommand(CLI::App& parent, const std::string& name, const std::string& description,
                     Action* action, Action run);

// Adds command group `name` (e.g. "regions") with a subcommand "list" that
// runs `list`, as does the group given alone. Returns the group.
CLI::App* AddListingGroup(CLI::App& parent, const std::string& name, const std::string& description,
                          const std::string& list_description, Action* action, Action list);

// Prints `message` as one JSON line when global.json, else `human()` as is.
// Errors: INTERNAL if the message cannot be printed as JSON.
absl::Status Emit(const GlobalOptions& global, const google::protobuf::Message& message,
                  const std::function<std::string()>& human);

// The status of a failed call, or Emit of its reply with `text(reply)` for
// humans.
template <typename Message, typename Text>
absl::Status EmitResult(const GlobalOptions& global, const absl::StatusOr<Message>& result,
                        Text text) {
  if (!result.ok()) return result.status();
  return Emit(global, *result, [&] { return text(*result); });
}

// CLI11 validators that rewrite the text in place so options bind to plain
// integers: sizes ("64KiB", "1.5G", "4096") become bytes, durations ("250ms",
// "10s") nanoseconds. Invalid text is a usage error (exit 2).
CLI::Validator SizeArg();
CLI::Validator DurationArg();

}  // namespace xferd::client
