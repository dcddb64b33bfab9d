// Output and argument helpers shared by xferctl's commands.
#include "client/cpp/commands.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "daemon/base/units.h"
#include "client/cpp/format.h"

namespace xferd::client {

void ConfigureApp(CLI::App& app, GlobalOptions* global, Action* action) {
  // Inherited by the subcommands added below: global options may follow them.
  app.fallthrough();
  app.require_subcommand(1);
  global->target = kDefaultTarget;
  app.add_option("--target", global->target,
                 "daemon address: host:port or unix:/path (env XFERD_TARGET)")
      ->envname("XFERD_TARGET")
      ->capture_default_str();
  app.add_flag("--json", global->json, "print one JSON document (proto field names) per command");
  app.add_option("--tls-ca", global->tls_ca,
                 "mTLS: CA that verifies the daemon, for host:port targets (env XFERD_TLS_CA)")
      ->envname("XFERD_TLS_CA");
  app.add_option("--tls-cert", global->tls_cert,
                 "mTLS: this client's certificate (env XFERD_TLS_CERT)")
      ->envname("XFERD_TLS_CERT");
  app.add_option("--tls-key", global->tls_key, "mTLS: its private key (env XFERD_TLS_KEY)")
      ->envname("XFERD_TLS_KEY");
  AddNodeCommands(app, action);
  AddRegionCommands(app, action);
  AddPeerCommands(app, action);
  AddTransferCommands(app, action);
  AddLayoutCommands(app, action);
  AddTopCommand(app, action);
}

CLI::App* AddCommand(CLI::App& parent, const std::string& name, const std::string& description,
                     Action* action, Action run) {
  CLI::App* command = parent.add_subcommand(name, description);
  command->callback([action, run = std::move(run)] { *action = run; });
  return command;
}

CLI::App* AddListingGroup(CLI::App& parent, const std::string& name, const std::string& description,
                          const std::string& list_description, Action* action, Action list) {
  CLI::App* group = parent.add_subcommand(name, description);
  group->require_subcommand(0, 1);
  group->callback([group, action, list] {
    if (group->get_subcommands().empty()) *action = list;
  });
  AddCommand(*group, "list", list_description, action, std::move(list));
  return group;
}

absl::Status Emit(const GlobalOptions& global, const google::protobuf::Message& message,
                  const std::function<std::string()>& human) {
  if (!global.json) {
    std::fputs(human().c_str(), stdout);
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> json = ToJson(message);
  if (!json.ok()) return json.status();
  std::printf("%s\n", json->c_str());
  return absl::OkStatus();
}

CLI::Validator SizeArg() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::StatusOr<uint64_t> bytes = ParseSize(text);
        if (!bytes.ok()) return std::string(bytes.status().message());
        text = absl::StrCat(*bytes);
        return "";
      },
      "SIZE", "size");
}

CLI::Validator DurationArg() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::StatusOr<absl::Duration> duration = ParseDurationText(text);
        if (!duration.ok()) return std::string(duration.status().message());
        text = absl::StrCat(absl::ToInt64Nanoseconds(*duration));
        return "";
      },
      "DURATION", "duration");
}

}  // namespace xferd::client
