// xferctl regions [list] [--cluster] | register | deregister | acl | watch.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"
#include "client/cpp/commands.h"
#include "client/cpp/format.h"

namespace xferd::client {
namespace {

struct RegisterOptions {
  std::string name;
  uint64_t size = 0;
  std::string backing = "anonymous";
  std::string file;
  bool create = false, remote_write = false, remote_read = false, hugepages = false;
  bool landed_ranges = false;
  int32_t numa_node = -1;
  std::vector<std::string> allow;
  std::vector<std::string> share_with;
};

std::string RegionPath(const v1::Region& r) { return r.file_path().empty() ? "-" : r.file_path(); }

std::string RegionsText(const v1::ListRegionsResponse& list) {
  if (list.regions().empty()) return "no regions\n";
  Table table({{"NAME"},
               {"SIZE", true},
               {"BACKING"},
               {"REMOTE"},
               {"TRANSPORT"},
               {"IN-FLIGHT", true},
               {"LANDED", true},
               {"PATH"}});
  std::string lost;  // regions that lost their memory, each with why
  for (const v1::Region& r : list.regions()) {
    table.AddRow({r.name(), FormatBytes(r.size()), BackingLabel(r.backing()),
                  AccessLabel(r.access()), TransportLabel(r.transport()),
                  absl::StrCat(r.transfers_in_flight()), absl::StrCat(r.landed_events()),
                  RegionPath(r)});
    if (r.lost().code() != 0) absl::StrAppend(&lost, "broken: ", ErrorLabel(r.lost()), "\n");
  }
  return table.Render() + lost;
}

// Every region the cluster directory publishes, from ListNodes: one row per
// node and region.
v1::FindRegionResponse ClusterRegions(const v1::ListNodesResponse& nodes) {
  v1::FindRegionResponse all;
  for (const v1::ClusterNode& n : nodes.nodes()) {
    for (const v1::DirectoryRegion& r : n.regions()) *all.add_regions() = r;
  }
  return all;
}

std::string ClusterRegionsText(const v1::FindRegionResponse& list) {
  if (list.regions().empty()) return "no regions in the cluster directory\n";
  Table table({{"NODE"}, {"NAME"}, {"SIZE", true}, {"BACKING"}, {"REMOTE"}, {"ALLOWED PEERS"}});
  for (const v1::DirectoryRegion& r : list.regions()) {
    table.AddRow({r.node_id(), r.name(), FormatBytes(r.size()), BackingLabel(r.backing()),
                  AccessLabel(r.access()),
                  r.allowed_peers().empty() ? "any" : absl::StrJoin(r.allowed_peers(), ",")});
  }
  return table.Render();
}

std::string RegisteredText(const v1::Region& r) {
  const std::string allowed =
      r.allowed_peers().empty() ? "any peer" : absl::StrJoin(r.allowed_peers(), ", ");
  std::string tenant = r.tenant().empty() ? "-" : r.tenant();
  if (!r.shared_with().empty()) {
    absl::StrAppend(&tenant, ", shared with ", absl::StrJoin(r.shared_with(), ", "));
  }
  return absl::StrCat(
      "registered region ", r.name(), "\n",
      KeyValues({
          {"  size", absl::StrCat(FormatBytes(r.size()), " (", r.size(), " B)")},
          {"  backing",
           absl::StrCat(BackingLabel(r.backing()), r.hugepages() ? " on hugepages" : "",
                        r.numa_node() >= 0 ? absl::StrCat(", NUMA node ", r.numa_node()) : "")},
          {"  remote access", AccessLabel(r.access())},
          {"  allowed peers", allowed},
          {"  tenant", tenant},
          {"  transport", TransportLabel(r.transport())},
          {"  path", RegionPath(r)},
      }));
}

absl::StatusOr<v1::RegionBacking> ParseBacking(const std::string& text) {
  v1::RegionBacking backing;
  if (!v1::RegionBacking_Parse("REGION_BACKING_" + absl::AsciiStrToUpper(text), &backing)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown backing '", text, "'"));
  }
  return backing;
}

absl::Status Register(Client& client, const GlobalOptions& global, const RegisterOptions& o) {
  v1::RegisterRegionRequest request;
  request.set_name(o.name);
  request.set_size(o.size);
  absl::StatusOr<v1::RegionBacking> backing = ParseBacking(o.backing);
  if (!backing.ok()) return backing.status();
  request.set_backing(*backing);
  request.mutable_access()->set_remote_write(o.remote_write);
  request.mutable_access()->set_remote_read(o.remote_read);
  request.set_file_path(o.file);
  request.set_create(o.create);
  request.set_hugepages(o.hugepages);
  request.set_landed_ranges(o.landed_ranges);
  if (o.numa_node >= 0) request.set_numa_node(o.numa_node);
  for (const std::string& peer : o.allow) request.add_allowed_peers(peer);
  for (const std::string& tenant : o.share_with) request.add_shared_with(tenant);
  return EmitResult(global, client.RegisterRegion(request), RegisteredText);
}

std::string EventText(const v1::RegionEvent& e) {
  // Padded to the longest kind, "deregistered", so the columns line up.
  std::string line = absl::StrFormat("%s  %-12s  %s", FormatTimestamp(e.time()),
                                     EventKindLabel(e.kind()), e.region());
  if (e.kind() == v1::RegionEvent::KIND_LANDED) {
    absl::StrAppend(&line, "  [", e.offset(), ", +", e.length(), ")  ", FormatBytes(e.length()),
                    " from ", e.source_node(), " (transfer ", e.source_transfer_id(), ", #",
                    e.sequence(), ")");
  }
  if (e.dropped() > 0) absl::StrAppend(&line, "  (", e.dropped(), " events dropped before it)");
  if (e.ranges_missing()) absl::StrAppend(&line, "  ranges missing");
  const std::vector<std::pair<uint64_t, uint64_t>> ranges = LandedRanges(e);
  // The first few on the line; --json has them all.
  constexpr size_t kShown = 8;
  for (size_t i = 0; i < ranges.size() && i < kShown; ++i) {
    absl::StrAppend(&line, i == 0 ? "  ranges " : " ", "[", ranges[i].first, ", +",
                    ranges[i].second, ")");
  }
  if (ranges.size() > kShown) absl::StrAppend(&line, " ... (", ranges.size(), " ranges)");
  return line + "\n";
}

// Prints events as they come until the region goes away (or Ctrl-C).
absl::Status Watch(Client& client, const GlobalOptions& global, const std::string& name,
                   bool ranges) {
  absl::StatusOr<std::unique_ptr<RegionWatch>> watch =
      client.WatchRegion(name, absl::Seconds(10), ranges);
  if (!watch.ok()) return watch.status();
  for (;;) {
    absl::StatusOr<v1::RegionEvent> event = (*watch)->Next();
    if (absl::IsOutOfRange(event.status())) return absl::OkStatus();  // ended after DEREGISTERED
    RETURN_IF_ERROR(EmitResult(global, event, EventText));
    std::fflush(stdout);  // a reader at the other end of a pipe sees each event at once
  }
}

struct AclOptions {
  std::string name;
  std::vector<std::string> allow;
  bool any = false;
};

absl::Status SetAcl(Client& client, const GlobalOptions& global, const AclOptions& acl) {
  // Opening a region to everyone takes saying so: an empty --allow would.
  if (acl.allow.empty() == !acl.any) {
    return absl::InvalidArgumentError(
        "give the peers allowed from now on with --allow, or --any for any authenticated peer");
  }
  return EmitResult(global, client.SetRegionAcl(acl.name, acl.allow), [](const v1::Region& r) {
    return absl::StrCat("region ", r.name(), ": ",
                        r.allowed_peers().empty()
                            ? std::string("any authenticated peer")
                            : absl::StrCat("allowed peers ", absl::StrJoin(r.allowed_peers(), ", ")),
                        "\n");
  });
}

}  // namespace

void AddRegionCommands(CLI::App& app, Action* action) {
  auto cluster = std::make_shared<bool>(false);
  CLI::App* regions = AddListingGroup(
      app, "regions", "list, register, deregister, re-ACL or watch regions",
      "list the regions registered on the daemon (--cluster: on every daemon of the directory)",
      action, [cluster](Client& client, const GlobalOptions& global) {
        if (!*cluster) return EmitResult(global, client.ListRegions(), RegionsText);
        absl::StatusOr<v1::ListNodesResponse> nodes = client.ListNodes();
        if (!nodes.ok()) return nodes.status();
        return EmitResult(global, absl::StatusOr<v1::FindRegionResponse>(ClusterRegions(*nodes)),
                          ClusterRegionsText);
      });
  // `regions --cluster` and `regions list --cluster` alike.
  const char* cluster_help =
      "the regions every daemon of the cluster directory publishes (needs [cluster])";
  regions->add_flag("--cluster", *cluster, cluster_help);
  regions->get_subcommand("list")->add_flag("--cluster", *cluster, cluster_help);

  auto reg = std::make_shared<RegisterOptions>();
  CLI::App* add = AddCommand(*regions, "register", "register a region", action,
                             [reg](Client& client, const GlobalOptions& global) {
                               return Register(client, global, *reg);
                             });
  add->add_option("NAME", reg->name, "region name: 1-64 of [A-Za-z0-9._-]")->required();
  add->add_option("SIZE", reg->size, "size, e.g. 64MiB (0 with --backing file: the file's size)")
      ->required()
      ->transform(SizeArg());
  add->add_option("--backing", reg->backing, "where the memory comes from")
      ->capture_default_str()
      ->check(CLI::IsMember({"anonymous", "shm", "file"}));
  add->add_option("--file", reg->file, "file backing: absolute path of the file to map");
  add->add_flag("--create", reg->create, "file backing: create or grow the file to SIZE");
  add->add_flag("--remote-write", reg->remote_write, "peers may write into the region");
  add->add_flag("--remote-read", reg->remote_read, "peers may read from the region");
  add->add_flag("--hugepages", reg->hugepages, "anonymous backing: allocate on hugepages");
  add->add_option("--numa-node", reg->numa_node,
                  "anonymous or shm backing: allocate on this NUMA node (xferctl devices shows "
                  "the NICs' nodes)")
      ->check(CLI::NonNegativeNumber);
  add->add_flag("--landed-ranges", reg->landed_ranges,
                "keep many-block transfers' ranges for watchers (regions watch --ranges)");
  add->add_option("--allow", reg->allow, "node ids of the only peers allowed (default: any)");
  add->add_option("--share-with", reg->share_with,
                  "other tenants that may use, watch and map it (\"*\": all; default: none)");

  auto dereg = std::make_shared<std::pair<std::string, bool>>();
  CLI::App* remove = AddCommand(
      *regions, "deregister", "remove a region", action,
      [dereg](Client& client, const GlobalOptions& global) {
        return EmitResult(global, client.DeregisterRegion(dereg->first, dereg->second),
                          [&](const v1::DeregisterRegionResponse& r) {
                            std::string text = absl::StrCat("deregistered region ", dereg->first);
                            if (r.cancelled_transfers() > 0) {
                              absl::StrAppend(&text, " (cancelled ", r.cancelled_transfers(),
                                              " transfers)");
                            }
                            return text + "\n";
                          });
      });
  remove->add_option("NAME", dereg->first, "region name")->required();
  remove->add_flag("--force", dereg->second, "cancel the transfers using it instead of refusing");

  auto acl = std::make_shared<AclOptions>();
  CLI::App* set_acl = AddCommand(
      *regions, "acl", "replace a region's ACL: peers left out lose its keys at once", action,
      [acl](Client& client, const GlobalOptions& global) { return SetAcl(client, global, *acl); });
  set_acl->add_option("NAME", acl->name, "region name")->required();
  set_acl->add_option("--allow", acl->allow, "node ids of the only peers allowed from now on");
  set_acl->add_flag("--any", acl->any, "allow any authenticated peer (no --allow)");

  auto watched = std::make_shared<std::pair<std::string, bool>>();
  CLI::App* watch = AddCommand(*regions, "watch",
                               "print the region's events (landed data) as they happen", action,
                               [watched](Client& client, const GlobalOptions& global) {
                                 return Watch(client, global, watched->first, watched->second);
                               });
  watch->add_option("NAME", watched->first, "region name")->required();
  watch->add_flag("--ranges", watched->second,
                  "show the ranges of many-block transfers (a region with --landed-ranges)");
}

}  // namespace xferd::client
