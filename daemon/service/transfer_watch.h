// Calls that follow transfers as they run, on the watch loop, so that the
// poller that ends a transfer only notifies them:
// - WatchTransfer's stream: a snapshot at most every `interval` and always
//   the terminal one, after which the stream ends;
// - the reply of a submission with wait, sent once every transfer has ended,
//   or with a linger, sent at their end or when the linger runs out.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/engine/transfer.h"
#include "daemon/service/watch_loop.h"
#include "daemon/service/watch_stream.h"
#include "xferd/v1/xferd.pb.h"

namespace xferd::service {

class TransferWatchReactor final : public WatchStream<v1::Transfer> {
 public:
  // Sends the first snapshot at once. Deletes itself in OnDone.
  TransferWatchReactor(std::shared_ptr<engine::Transfer> transfer, absl::Duration interval,
                       WatchLoop& loop);

  // Watch thread: sends a snapshot if one is due (or the transfer ended).
  absl::Time Run(absl::Time now) override;

 private:
  void OnWrittenLocked() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<engine::Transfer> transfer_;
  const absl::Duration interval_;
  absl::Time next_ ABSL_GUARDED_BY(mu_);  // the next snapshot is due then
};

// What a Write, Read, SubmitBatch or SubmitStream reply is made of: `fill`
// writes the transfers' snapshots (in submission order) into the response,
// `finish` ends the call.
using FillReply = std::function<void(const std::vector<engine::TransferInfo>&)>;
using FinishCall = std::function<void(const grpc::Status&)>;

// Replies with the transfers' current snapshots (the caller's thread).
void ReplyWith(const std::vector<std::shared_ptr<engine::Transfer>>& transfers,
               const FillReply& fill, const FinishCall& finish);

// The reply of a submission with wait (or a linger), sent once every
// transfer has ended, or at `reply_by` with the snapshots of then: from the
// watch thread, not from the poller that ended the last one.
class TransferWaiter final : public WatchTask {
 public:
  // Any thread but a poller (e.g. the engine's submission callback): the
  // loop owns the waiter until it has replied. `reply_by`:
  // absl::InfiniteFuture() to wait for the end whatever it takes.
  static void Start(WatchLoop& loop, std::vector<std::shared_ptr<engine::Transfer>> transfers,
                    FillReply fill, FinishCall finish,
                    absl::Time reply_by = absl::InfiniteFuture());

  // Watch thread: replies once every transfer has ended or `reply_by` came.
  absl::Time Run(absl::Time now) override;

 private:
  TransferWaiter(std::vector<std::shared_ptr<engine::Transfer>> transfers, FillReply fill,
                 FinishCall finish, absl::Time reply_by);

  const std::vector<std::shared_ptr<engine::Transfer>> transfers_;
  const FillReply fill_;
  const FinishCall finish_;
  const absl::Time reply_by_;
};

}  // namespace xferd::service
