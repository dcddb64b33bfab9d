// xferctl layouts [list] | prepare | delete: the named block layouts that
// write and read --layout index into.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"
#include "client/cpp/block_args.h"
#include "client/cpp/commands.h"
#include "client/cpp/format.h"

namespace xferd::client {
namespace {

struct PrepareOptions {
  std::string name, region, peer;
  uint64_t block_length = 0, start = 0, stride = 0, count = 0;
  std::string offsets_file;
};

std::string LayoutsText(const v1::ListLayoutsResponse& list) {
  if (list.layouts().empty()) return "no layouts\n";
  Table table({{"NAME"}, {"PEER"}, {"REGION"}, {"BLOCK", true}, {"BLOCKS", true}});
  for (const v1::Layout& l : list.layouts()) {
    table.AddRow({l.name(), l.peer().empty() ? "-" : l.peer(), l.region(),
                  FormatBytes(l.block_length()), absl::StrCat(l.blocks())});
  }
  return table.Render();
}

std::string PreparedText(const v1::Layout& l) {
  return absl::StrCat("prepared layout ", l.name(), ": ", l.blocks(), " blocks of ",
                      FormatBytes(l.block_length()), " in region ", l.region(),
                      l.peer().empty() ? "" : absl::StrCat(" on peer ", l.peer()), "\n");
}

absl::Status Prepare(Client& client, const GlobalOptions& global, const PrepareOptions& o) {
  v1::PrepareLayoutRequest request;
  request.set_name(o.name);
  request.set_peer(o.peer);
  request.set_region(o.region);
  request.set_block_length(o.block_length);
  if (o.offsets_file.empty() == (o.count == 0)) {
    return absl::InvalidArgumentError(
        "give either --count (blocks at --start + k * --stride) or --offsets FILE");
  }
  if (!o.offsets_file.empty()) {
    ASSIGN_OR_RETURN(const std::string contents, ReadArgumentFile(o.offsets_file));
    ASSIGN_OR_RETURN(*request.mutable_offsets(),
                     ParseOffsetFile(contents, ArgumentFileName(o.offsets_file)));
  } else {
    request.set_start(o.start);
    // Blocks back to back unless told otherwise.
    request.set_stride(o.stride == 0 ? o.block_length : o.stride);
    request.set_count(o.count);
  }
  return EmitResult(global, client.PrepareLayout(request), PreparedText);
}

}  // namespace

void AddLayoutCommands(CLI::App& app, Action* action) {
  CLI::App* layouts =
      AddListingGroup(app, "layouts", "list, prepare or delete block layouts (for --layout)",
                      "list the layouts prepared on the daemon", action,
                      [](Client& client, const GlobalOptions& global) {
                        return EmitResult(global, client.ListLayouts(), LayoutsText);
                      });

  auto prep = std::make_shared<PrepareOptions>();
  CLI::App* prepare =
      AddCommand(*layouts, "prepare", "name a list of equal blocks of a region (local or a peer's)",
                 action, [prep](Client& client, const GlobalOptions& global) {
                   return Prepare(client, global, *prep);
                 });
  prepare->add_option("NAME", prep->name, "layout name: 1-64 of [A-Za-z0-9._-]")->required();
  prepare->add_option("REGION", prep->region, "the region the blocks are in")->required();
  prepare->add_option("--peer", prep->peer, "the region is this peer's (default: local)");
  prepare->add_option("--block-length", prep->block_length, "bytes of every block")
      ->required()
      ->transform(SizeArg());
  prepare->add_option("--count", prep->count, "blocks at --start + k * --stride");
  prepare->add_option("--start", prep->start, "offset of block 0 (default 0)")
      ->transform(SizeArg());
  prepare->add_option("--stride", prep->stride, "distance between blocks (default: block length)")
      ->transform(SizeArg());
  prepare->add_option("--offsets", prep->offsets_file,
                      "instead of --count: a file ('-': stdin) of one block offset per line");

  auto name = std::make_shared<std::string>();
  AddCommand(*layouts, "delete", "delete a layout", action,
             [name](Client& client, const GlobalOptions& global) {
               return EmitResult(global, client.DeleteLayout(*name),
                                 [&](const v1::DeleteLayoutResponse&) {
                                   return absl::StrCat("deleted layout ", *name, "\n");
                                 });
             })
      ->add_option("NAME", *name, "layout name")
      ->required();
}

}  // namespace xferd::client
