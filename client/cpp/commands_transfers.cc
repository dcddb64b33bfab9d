// xferctl write | read | transfers | transfer ID | cancel ID.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cpp/block_args.h"
#include "client/cpp/commands.h"
#include "client/cpp/format.h"
#include "client/cpp/progress_bar.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"

namespace xferd::client {
namespace {

// xferctl write and xferctl read: one range, or many blocks.
struct MoveOptions {
  bool read = false;
  std::string src, peer, dst;
  uint64_t length = 0;
  const CLI::Option* length_option = nullptr;  // not given: the rest of the region
  uint64_t src_offset = 0, dst_offset = 0, slice = 0;
  int64_t timeout_ns = 0;  // 0: no deadline
  bool no_wait = false;
  v1::Priority priority = v1::PRIORITY_UNSPECIFIED;
  bool verify = false;
  std::string checksums_out;       // a verified transfer's checksums, written once done
  std::string expected_checksums;  // a read's, from a file ('-': stdin)
  BlockArgs blocks;
};

struct ListOptions {
  bool all = false;
  uint64_t batch = 0;
  uint32_t limit = 0;
};

std::string Endpoint(const std::string& region, uint64_t offset) {
  return absl::StrCat(region, "+", offset);
}

std::string TransfersText(const v1::ListTransfersResponse& list) {
  if (list.transfers().empty()) return "no transfers\n";
  Table table({{"ID", true},
               {"STATE"},
               {"TRANSPORT"},
               {"SOURCE"},
               {"PEER"},
               {"DESTINATION"},
               {"LENGTH", true},
               {"DONE", true},
               {"SUBMITTED"},
               {"ERROR"}});
  for (const v1::Transfer& t : list.transfers()) {
    table.AddRow({absl::StrCat(t.id()), StateLabel(t.state()), TransportLabel(t.transport()),
                  Endpoint(t.src_region(), t.src_offset()), t.peer(),
                  Endpoint(t.dst_region(), t.dst_offset()), FormatBytes(t.length()),
                  Percent(t.bytes_done(), t.length()), FormatTimestamp(t.submitted_at()),
                  ErrorLabel(t.error())});
  }
  return table.Render();
}

std::string TransferText(const v1::Transfer& t) {
  std::string elapsed = "-";
  if (t.has_submitted_at() && t.has_finished_at()) {
    elapsed = FormatElapsed(ToTime(t.finished_at()) - ToTime(t.submitted_at()));
  }
  return KeyValues({
      {"id", absl::StrCat(t.id())},
      {"state", StateLabel(t.state())},
      {"transport", TransportLabel(t.transport())},
      {"source", Endpoint(t.src_region(), t.src_offset())},
      {"peer", t.peer()},
      {"destination", Endpoint(t.dst_region(), t.dst_offset())},
      {"length", absl::StrCat(FormatBytes(t.length()), " (", t.length(), " B)")},
      {"done",
       absl::StrCat(FormatBytes(t.bytes_done()), " (", Percent(t.bytes_done(), t.length()), ")")},
      {"slices", absl::StrCat(t.slices(), " x ", FormatBytes(t.slice_size()))},
      {"batch", t.batch_id() == 0 ? "-" : absl::StrCat(t.batch_id())},
      {"label", t.label().empty() ? "-" : t.label()},
      {"priority", PriorityLabel(t.priority())},
      {"verified",
       t.verify() ? absl::StrCat("yes, ", t.checksums().size() / 8, " checksums") : "no"},
      {"submitted", FormatTimestamp(t.submitted_at())},
      {"finished", FormatTimestamp(t.finished_at())},
      {"elapsed", elapsed},
      {"error", t.has_error() ? ErrorLabel(t.error()) : "-"},
  });
}

std::string QueuedText(const v1::Transfer& t) {
  const std::string blocks = t.blocks() > 1 ? absl::StrCat(" in ", t.blocks(), " blocks") : "";
  const std::string local_src = Endpoint(t.src_region(), t.src_offset());
  const std::string remote_dst =
      absl::StrCat(t.peer(), ":", Endpoint(t.dst_region(), t.dst_offset()));
  const bool read = t.direction() == v1::Transfer::DIRECTION_READ;
  return absl::StrCat("transfer ", t.id(), " ", StateLabel(t.state()), ": ",
                      FormatBytes(t.length()), blocks, " from ",
                      read ? absl::StrCat(t.peer(), ":", local_src) : local_src, " to ",
                      read ? Endpoint(t.dst_region(), t.dst_offset()) : remote_dst, " over ",
                      TransportLabel(t.transport()), " (", t.slices(), " slices)\n");
}

// The size of the local region `name` (0 if it is not registered: the daemon
// then refuses the request, naming it).
absl::StatusOr<uint64_t> LocalRegionSize(Client& client, const std::string& name) {
  ASSIGN_OR_RETURN(const v1::ListRegionsResponse regions, client.ListRegions());
  for (const v1::Region& r : regions.regions()) {
    if (r.name() == name) return r.size();
  }
  return 0;
}

// Fills the fields WriteRequest and ReadRequest share (the same names).
template <typename Request>
absl::Status FillRequest(Client& client, const MoveOptions& o, Request* request) {
  request->set_src_region(o.src);
  request->set_peer(o.peer);
  request->set_dst_region(o.dst);
  request->set_slice_size(o.slice);
  request->set_priority(o.priority);
  if (o.verify) request->set_verify(true);
  if (o.timeout_ns > 0) {
    request->mutable_timeout()->set_seconds(o.timeout_ns / 1000000000);
    request->mutable_timeout()->set_nanos(static_cast<int32_t>(o.timeout_ns % 1000000000));
  }
  if (o.blocks.any()) {
    if (o.length_option->count() > 0 || o.src_offset != 0 || o.dst_offset != 0) {
      return absl::InvalidArgumentError(
          "--length, --src-offset and --dst-offset do not go with --blocks, --strided or "
          "--layout: the blocks give every offset and length");
    }
    ASSIGN_OR_RETURN(*request->mutable_blocks(), BlocksFromArgs(o.blocks));
    return absl::OkStatus();
  }
  request->set_src_offset(o.src_offset);
  request->set_dst_offset(o.dst_offset);
  request->set_length(o.length);
  if (o.length_option->count() > 0) return absl::OkStatus();
  // No --length: the rest of the local region (a write's source, a read's
  // destination) from its offset; the daemon checks the other side.
  const uint64_t offset = o.read ? o.dst_offset : o.src_offset;
  ASSIGN_OR_RETURN(const uint64_t size, LocalRegionSize(client, o.read ? o.dst : o.src));
  request->set_length(size > offset ? size - offset : 0);
  return absl::OkStatus();
}

// A file of checksums as a verified transfer returns them (Transfer.checksums:
// one little-endian uint64 per block), e.g. saved by --checksums-out.
absl::StatusOr<std::string> ReadChecksumsFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string sums, ReadArgumentFile(path));
  if (sums.empty() || sums.size() % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checksums file ", ArgumentFileName(path), " holds ", sums.size(),
        " bytes: expected 8 per block (little-endian uint64), as --checksums-out saves them"));
  }
  return sums;
}

absl::Status WriteChecksumsFile(const std::string& path, const v1::Transfer& end) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(end.checksums().data(), static_cast<std::streamsize>(end.checksums().size()));
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write checksums to '", path, "'"));
  return absl::OkStatus();
}

absl::StatusOr<v1::Transfer> Submit(Client& client, const MoveOptions& o) {
  if (o.read) {
    v1::ReadRequest request;
    RETURN_IF_ERROR(FillRequest(client, o, &request));
    if (!o.expected_checksums.empty()) {
      ASSIGN_OR_RETURN(*request.mutable_expected_checksums(),
                       ReadChecksumsFile(o.expected_checksums));
    }
    return client.ReadBlocks(request);
  }
  v1::WriteRequest request;
  RETURN_IF_ERROR(FillRequest(client, o, &request));
  return client.WriteBlocks(request);
}

// Waits for the end of `queued`, drawing a progress bar on stderr if `draw`.
absl::StatusOr<v1::Transfer> WaitWithProgress(Client& client, const v1::Transfer& queued,
                                              absl::Time start, bool draw) {
  if (IsTerminal(queued.state())) return queued;
  std::optional<ProgressBar> bar;
  if (draw) bar.emplace(stderr, queued.length(), start, queued.blocks());
  absl::StatusOr<v1::Transfer> end = client.WaitTransfer(queued.id(), [&](const v1::Transfer& t) {
    if (bar) bar->Update(t.bytes_done(), absl::Now());
  });
  if (bar) bar->Clear();
  return end;
}

absl::Status RunMove(Client& client, const GlobalOptions& global, const MoveOptions& o) {
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(const v1::Transfer queued, Submit(client, o));
  if (o.no_wait) return Emit(global, queued, [&] { return QueuedText(queued); });
  const bool draw = !global.json && ::isatty(STDERR_FILENO) == 1;
  ASSIGN_OR_RETURN(const v1::Transfer end, WaitWithProgress(client, queued, start, draw));
  RETURN_IF_ERROR(Emit(global, end, [&] { return WriteSummary(end, absl::Now() - start) + "\n"; }));
  if (!o.checksums_out.empty() && end.state() == v1::TRANSFER_STATE_DONE) {
    RETURN_IF_ERROR(WriteChecksumsFile(o.checksums_out, end));
  }
  return TransferOutcome(end);
}

// The options write and read share: range, blocks, slicing, deadline.
void AddMoveOptions(CLI::App* command, MoveOptions* o) {
  const std::string local = o->read ? "DST" : "SRC";
  o->length_option =
      command
          ->add_option("--length", o->length,
                       "bytes to move (default: the rest of " + local + " from its offset)")
          ->transform(SizeArg());
  command->add_option("--src-offset", o->src_offset, "offset in SRC")->transform(SizeArg());
  command->add_option("--dst-offset", o->dst_offset, "offset in DST")->transform(SizeArg());
  command->add_option("--blocks", o->blocks.blocks_file,
                      "many blocks: a block file ('-': stdin) of 'src_offset dst_offset length' "
                      "lines, or binary (see README)");
  command->add_option("--strided", o->blocks.strided,
                      "many blocks: src_start,dst_start,block_length,src_stride,dst_stride,count "
                      "(repeat for more runs)");
  command->add_option("--layout", o->blocks.layouts,
                      "many blocks: SRC_LAYOUT:DST_LAYOUT, prepared layouts (with --indices)");
  command->add_option("--indices", o->blocks.indices_file,
                      "with --layout: a file ('-': stdin) of 'src_index dst_index' lines");
  command->add_option("--slice", o->slice, "slice size, 4KiB..16MiB (default: the daemon's)")
      ->transform(SizeArg());
  command->add_option("--timeout", o->timeout_ns, "fail the transfer if not done in time, e.g. 10s")
      ->transform(DurationArg());
  CLI::Option* no_wait =
      command->add_flag("--no-wait", o->no_wait, "return once queued; print the transfer id");
  CLI::Option* verify =
      command->add_flag("--verify", o->verify,
                        "check every block end to end (a CRC-64 per block); DATA_LOSS names one "
                        "that landed otherwise (docs/integrity.md)");
  command
      ->add_option("--checksums-out", o->checksums_out,
                   "with --verify: once done, save the blocks' checksums (8 bytes each, "
                   "little-endian) to FILE, for a later read's --expected-checksums")
      ->needs(verify)
      ->excludes(no_wait);
  command
      ->add_option("--priority", o->priority,
                   "the transfer's class: critical, normal (default), bulk or background")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, v1::Priority>{{"critical", v1::PRIORITY_CRITICAL},
                                              {"normal", v1::PRIORITY_NORMAL},
                                              {"bulk", v1::PRIORITY_BULK},
                                              {"background", v1::PRIORITY_BACKGROUND}},
          CLI::ignore_case));
}

void AddMoveCommands(CLI::App& app, Action* action) {
  auto w = std::make_shared<MoveOptions>();
  CLI::App* write = AddCommand(
      app, "write", "write a local region's bytes (or blocks) into a peer's region, with progress",
      action,
      [w](Client& client, const GlobalOptions& global) { return RunMove(client, global, *w); });
  write->add_option("SRC", w->src, "local source region")->required();
  write->add_option("PEER", w->peer, "destination peer: node id or address")->required();
  write->add_option("DST", w->dst, "the peer's destination region")->required();
  AddMoveOptions(write, w.get());

  auto r = std::make_shared<MoveOptions>();
  r->read = true;
  CLI::App* read = AddCommand(
      app, "read", "read a peer's region bytes (or blocks) into a local region, with progress",
      action,
      [r](Client& client, const GlobalOptions& global) { return RunMove(client, global, *r); });
  read->add_option("PEER", r->peer, "source peer: node id or address")->required();
  read->add_option("SRC", r->src, "the peer's source region (remote_read, this node allowed)")
      ->required();
  read->add_option("DST", r->dst, "local destination region")->required();
  AddMoveOptions(read, r.get());
  read->add_option("--expected-checksums", r->expected_checksums,
                   "a restore: FILE ('-': stdin) of the checksums the blocks must have, as a "
                   "verified write's --checksums-out saved them; a block that differs fails "
                   "DATA_LOSS naming it (implies --verify)");
}

}  // namespace

void AddTransferCommands(CLI::App& app, Action* action) {
  AddMoveCommands(app, action);

  auto list = std::make_shared<ListOptions>();
  CLI::App* transfers =
      AddCommand(app, "transfers", "list transfers (in flight; --all adds finished ones)", action,
                 [list](Client& client, const GlobalOptions& global) {
                   v1::ListTransfersRequest request;
                   request.set_include_finished(list->all);
                   request.set_batch_id(list->batch);
                   request.set_limit(list->limit);
                   return EmitResult(global, client.ListTransfers(request), TransfersText);
                 });
  transfers->add_flag("-a,--all", list->all, "include finished transfers kept in history");
  transfers->add_option("--batch", list->batch, "only the transfers of this batch");
  transfers->add_option("--limit", list->limit, "at most this many, newest first (default: all)");

  auto id = std::make_shared<uint64_t>(0);
  AddCommand(app, "transfer", "show one transfer", action,
             [id](Client& client, const GlobalOptions& global) {
               return EmitResult(global, client.GetTransfer(*id), TransferText);
             })
      ->add_option("ID", *id, "transfer id")
      ->required();
  AddCommand(app, "cancel", "cancel a queued or running transfer", action,
             [id](Client& client, const GlobalOptions& global) {
               return EmitResult(global, client.CancelTransfer(*id), [](const v1::Transfer& t) {
                 if (t.state() == v1::TRANSFER_STATE_CANCELLED) {
                   return absl::StrCat("transfer ", t.id(), " cancelled\n");
                 }
                 return absl::StrCat("transfer ", t.id(),
                                     " had already ended: ", StateLabel(t.state()), "\n");
               });
             })
      ->add_option("ID", *id, "transfer id")
      ->required();
}

}  // namespace xferd::client
