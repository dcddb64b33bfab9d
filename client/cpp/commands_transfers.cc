// xferctl write | transfers | transfer ID | cancel ID.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"
#include "client/cpp/commands.h"
#include "client/cpp/format.h"
#include "client/cpp/progress_bar.h"

namespace xferd::client {
namespace {

struct WriteOptions {
  std::string src, peer, dst;
  uint64_t length = 0;
  const CLI::Option* length_option = nullptr;  // not given: the rest of the source
  uint64_t src_offset = 0, dst_offset = 0, slice = 0;
  int64_t timeout_ns = 0;  // 0: no deadline
  bool no_wait = false;
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
      {"submitted", FormatTimestamp(t.submitted_at())},
      {"finished", FormatTimestamp(t.finished_at())},
      {"elapsed", elapsed},
      {"error", t.has_error() ? ErrorLabel(t.error()) : "-"},
  });
}

std::string QueuedText(const v1::Transfer& t) {
  return absl::StrCat("transfer ", t.id(), " ", StateLabel(t.state()), ": ",
                      FormatBytes(t.length()), " from ", Endpoint(t.src_region(), t.src_offset()),
                      " to ", t.peer(), ":", Endpoint(t.dst_region(), t.dst_offset()), " over ",
                      TransportLabel(t.transport()), " (", t.slices(), " slices)\n");
}

absl::StatusOr<v1::WriteRequest> MakeRequest(Client& client, const WriteOptions& o) {
  v1::WriteRequest request;
  request.set_src_region(o.src);
  request.set_src_offset(o.src_offset);
  request.set_peer(o.peer);
  request.set_dst_region(o.dst);
  request.set_dst_offset(o.dst_offset);
  request.set_slice_size(o.slice);
  request.set_length(o.length);
  if (o.timeout_ns > 0) {
    request.mutable_timeout()->set_seconds(o.timeout_ns / 1000000000);
    request.mutable_timeout()->set_nanos(static_cast<int32_t>(o.timeout_ns % 1000000000));
  }
  if (o.length_option->count() > 0) return request;
  // No --length: the rest of the source region (the daemon checks the rest).
  ASSIGN_OR_RETURN(const v1::ListRegionsResponse regions, client.ListRegions());
  for (const v1::Region& r : regions.regions()) {
    if (r.name() == o.src)
      request.set_length(r.size() > o.src_offset ? r.size() - o.src_offset : 0);
  }
  return request;
}

// Waits for the end of `queued`, drawing a progress bar on stderr if `draw`.
absl::StatusOr<v1::Transfer> WaitWithProgress(Client& client, const v1::Transfer& queued,
                                              absl::Time start, bool draw) {
  if (IsTerminal(queued.state())) return queued;
  std::optional<ProgressBar> bar;
  if (draw) bar.emplace(stderr, queued.length(), start);
  absl::StatusOr<v1::Transfer> end = client.WaitTransfer(queued.id(), [&](const v1::Transfer& t) {
    if (bar) bar->Update(t.bytes_done(), absl::Now());
  });
  if (bar) bar->Clear();
  return end;
}

absl::Status RunWrite(Client& client, const GlobalOptions& global, const WriteOptions& o) {
  ASSIGN_OR_RETURN(const v1::WriteRequest request, MakeRequest(client, o));
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(const v1::Transfer queued, client.Write(request));
  if (o.no_wait) return Emit(global, queued, [&] { return QueuedText(queued); });
  const bool draw = !global.json && ::isatty(STDERR_FILENO) == 1;
  ASSIGN_OR_RETURN(const v1::Transfer end, WaitWithProgress(client, queued, start, draw));
  RETURN_IF_ERROR(Emit(global, end, [&] { return WriteSummary(end, absl::Now() - start) + "\n"; }));
  return TransferOutcome(end);
}

void AddWriteCommand(CLI::App& app, Action* action) {
  auto o = std::make_shared<WriteOptions>();
  CLI::App* write = AddCommand(
      app, "write", "write a local region's bytes into a peer's region, showing progress", action,
      [o](Client& client, const GlobalOptions& global) { return RunWrite(client, global, *o); });
  write->add_option("SRC", o->src, "local source region")->required();
  write->add_option("PEER", o->peer, "destination peer: node id or address")->required();
  write->add_option("DST", o->dst, "the peer's destination region")->required();
  o->length_option = write
                         ->add_option("--length", o->length,
                                      "bytes to write (default: the "
                                      "rest of SRC from --src-offset)")
                         ->transform(SizeArg());
  write->add_option("--src-offset", o->src_offset, "offset in SRC")->transform(SizeArg());
  write->add_option("--dst-offset", o->dst_offset, "offset in DST")->transform(SizeArg());
  write->add_option("--slice", o->slice, "slice size, 4KiB..16MiB (default: the daemon's)")
      ->transform(SizeArg());
  write->add_option("--timeout", o->timeout_ns, "fail the transfer if not done in time, e.g. 10s")
      ->transform(DurationArg());
  write->add_flag("--no-wait", o->no_wait, "return once queued; print the transfer id");
}

}  // namespace

void AddTransferCommands(CLI::App& app, Action* action) {
  AddWriteCommand(app, action);

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
