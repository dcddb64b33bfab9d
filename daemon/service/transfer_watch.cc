#include "daemon/service/transfer_watch.h"

#include <algorithm>

#include "daemon/service/proto_convert.h"

namespace xferd::service {
namespace {

// WatchTransfer intervals are at least this: a snapshot is a Info() copy,
// a message and a write.
constexpr absl::Duration kMinInterval = absl::Milliseconds(10);

}  // namespace

TransferWatchReactor::TransferWatchReactor(std::shared_ptr<engine::Transfer> transfer,
                                           absl::Duration interval, WatchLoop& loop)
    : transfer_(std::move(transfer)), interval_(std::max(interval, kMinInterval)) {
  MutexLock lock(&mu_);
  SendLocked(absl::Now());
  Attach(loop);
  // Its end is sent at once, not at the next interval. If it has ended
  // already, Run sees it once the first snapshot is written.
  transfer_->AddObserver([handle = handle_](const engine::TransferInfo&) { handle->Notify(); });
}

absl::Time TransferWatchReactor::Run(absl::Time now) {
  MutexLock lock(&mu_);
  // With a snapshot on its way, OnWrittenLocked notifies once it is written.
  if (!IdleLocked()) return absl::InfiniteFuture();
  if (now < next_ && !engine::IsTerminal(transfer_->state())) return next_;
  SendLocked(now);
  return absl::InfiniteFuture();
}

void TransferWatchReactor::OnWrittenLocked() { handle_->Notify(); }

void TransferWatchReactor::SendLocked(absl::Time now) {
  message_.Clear();
  const engine::TransferInfo info = transfer_->Info();
  ToProto(info, &message_);
  next_ = now + interval_;
  WriteLocked(/*last=*/engine::IsTerminal(info.state));
}

void ReplyWith(const std::vector<std::shared_ptr<engine::Transfer>>& transfers,
               const FillReply& fill, const FinishCall& finish) {
  std::vector<engine::TransferInfo> infos;
  infos.reserve(transfers.size());
  for (const std::shared_ptr<engine::Transfer>& t : transfers) infos.push_back(t->Info());
  fill(infos);
  finish(grpc::Status::OK);
}

TransferWaiter::TransferWaiter(std::vector<std::shared_ptr<engine::Transfer>> transfers,
                               FillReply fill, FinishCall finish, absl::Time reply_by)
    : transfers_(std::move(transfers)),
      fill_(std::move(fill)),
      finish_(std::move(finish)),
      reply_by_(reply_by) {}

void TransferWaiter::Start(WatchLoop& loop,
                           std::vector<std::shared_ptr<engine::Transfer>> transfers, FillReply fill,
                           FinishCall finish, absl::Time reply_by) {
  std::vector<std::shared_ptr<engine::Transfer>> watched = transfers;
  std::shared_ptr<WatchHandle> handle = loop.Add(std::unique_ptr<TransferWaiter>(new TransferWaiter(
      std::move(transfers), std::move(fill), std::move(finish), reply_by)));
  for (const std::shared_ptr<engine::Transfer>& t : watched) {
    t->AddObserver([handle](const engine::TransferInfo&) { handle->Notify(); });
  }
  // One more look once every observer is in place: a transfer that ended
  // before its observer could be added has no one else to say so.
  handle->Notify();
}

absl::Time TransferWaiter::Run(absl::Time now) {
  if (now < reply_by_) {
    for (const std::shared_ptr<engine::Transfer>& t : transfers_) {
      if (!engine::IsTerminal(t->state())) return reply_by_;  // or its end notifies
    }
  }
  ReplyWith(transfers_, fill_, finish_);
  return kDone;
}

}  // namespace xferd::service
