// xferctl: the operator's command-line tool for an xferd daemon. Parses the
// command line (CLI11 subcommands), connects to the daemon (--target, else
// $XFERD_TARGET, else the default unix socket) and runs the chosen command.
// Exit codes: 0 success, 1 RPC or transfer failure, 2 usage error.
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "client/cpp/commands.h"
#include "client/cpp/xferd_client.h"

namespace xferd::client {
namespace {

// How long to wait for the daemon's channel: long enough for a loaded host,
// short enough that a wrong --target is reported promptly.
constexpr absl::Duration kConnectTimeout = absl::Seconds(5);

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "xferctl: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return kExitFailure;
}

int Main(int argc, char** argv) {
  CLI::App app{"xferctl: manage an xferd daemon (regions, peers, transfers)"};
  GlobalOptions global;
  Action action;
  ConfigureApp(app, &global, &action);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a "parse error" with exit code 0; every other one is usage.
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  ClientOptions options;
  // The unix socket is always plain: access there is by file permission.
  if (!global.tls_ca.empty() && global.target.rfind("unix:", 0) != 0) {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> tls =
        TlsCredentials(global.tls_ca, global.tls_cert, global.tls_key);
    if (!tls.ok()) return Fail(tls.status());
    options.credentials = *std::move(tls);
  }
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(global.target, kConnectTimeout, options);
  if (!client.ok()) return Fail(client.status());
  absl::Status status = action(**client, global);
  std::fflush(stdout);
  return status.ok() ? 0 : Fail(status);
}

}  // namespace
}  // namespace xferd::client

int main(int argc, char** argv) { return xferd::client::Main(argc, argv); }
