// xferctl peers [list] | connect | disconnect.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/base/units.h"
#include "client/cpp/commands.h"
#include "client/cpp/format.h"

namespace xferd::client {
namespace {

struct ConnectOptions {
  std::string address;
  int64_t timeout_ns = 0;  // 0: the daemon's default
};

std::string PeersText(const v1::ListPeersResponse& list) {
  if (list.peers().empty()) return "no peers\n";
  Table table({{"NODE"},
               {"ADDRESS"},
               {"TRANSPORT"},
               {"STATE"},
               {"LANES", true},
               {"DIRECTION"},
               {"SENT", true},
               {"RECEIVED", true},
               {"DEVICE"},
               {"ERROR"}});
  for (const v1::Peer& p : list.peers()) {
    table.AddRow({p.node_id(), p.address(), TransportLabel(p.transport()),
                  PeerStateLabel(p.state()), absl::StrCat(p.lanes()),
                  p.outbound() ? "outbound" : "inbound", FormatBytes(p.bytes_sent()),
                  FormatBytes(p.bytes_received()), p.device().empty() ? "-" : p.device(),
                  ErrorLabel(p.last_error())});
  }
  return table.Render();
}

std::string ConnectedText(const v1::Peer& p) {
  return absl::StrCat(PeerStateLabel(p.state()), " to ", p.node_id(), " at ", p.address(), " over ",
                      TransportLabel(p.transport()), " (", p.lanes(), " lanes",
                      p.device().empty() ? "" : ", device " + p.device(), ")\n");
}

}  // namespace

void AddPeerCommands(CLI::App& app, Action* action) {
  CLI::App* peers = AddListingGroup(app, "peers", "list, connect or disconnect peer daemons",
                                    "list the peers of the daemon", action,
                                    [](Client& client, const GlobalOptions& global) {
                                      return EmitResult(global, client.ListPeers(), PeersText);
                                    });

  auto connect = std::make_shared<ConnectOptions>();
  CLI::App* add = AddCommand(
      *peers, "connect", "connect to another daemon (handshake; idempotent)", action,
      [connect](Client& client, const GlobalOptions& global) {
        return EmitResult(
            global, client.ConnectPeer(connect->address, absl::Nanoseconds(connect->timeout_ns)),
            ConnectedText);
      });
  add->add_option("ADDRESS", connect->address, "the other daemon's gRPC address, host:port")
      ->required();
  add->add_option("--timeout", connect->timeout_ns, "bound on the handshake (default 10s)")
      ->transform(DurationArg());

  auto peer = std::make_shared<std::string>();
  AddCommand(*peers, "disconnect", "close the lanes to a peer; its transfers fail", action,
             [peer](Client& client, const GlobalOptions& global) {
               return EmitResult(
                   global, client.DisconnectPeer(*peer), [&](const v1::DisconnectPeerResponse& r) {
                     return absl::StrCat("disconnected ", *peer, " (", r.failed_transfers(),
                                         " transfers failed)\n");
                   });
             })
      ->add_option("PEER", *peer, "node id or address of the peer")
      ->required();
}

}  // namespace xferd::client
