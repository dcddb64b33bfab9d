// WatchTransfer's stream: a snapshot of one transfer at most every `interval`
// and always its terminal snapshot, after which the stream ends. A ticker
// thread paces the snapshots; the transfer's end triggers the last one.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/engine/transfer.h"
#include "xferd/v1/xferd.pb.h"

namespace xferd::service {

class TransferWatchReactor;

// State shared by a reactor and whoever pokes it (ticker, transfer observer):
// they lock it and find `reactor` null once the reactor is gone.
struct TransferWatchHandle {
  Mutex mu;
  TransferWatchReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
};

// One thread that pokes every live transfer watch every few milliseconds.
class WatchTicker {
 public:
  WatchTicker();
  ~WatchTicker();
  void Add(std::shared_ptr<TransferWatchHandle> handle);

 private:
  void Loop();

  Mutex mu_;
  std::vector<std::shared_ptr<TransferWatchHandle>> handles_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class TransferWatchReactor final : public grpc::ServerWriteReactor<v1::Transfer> {
 public:
  // Sends the first snapshot at once. Deletes itself in OnDone.
  TransferWatchReactor(std::shared_ptr<engine::Transfer> transfer, absl::Duration interval,
                       WatchTicker& ticker);

  // Ticker or observer: sends a snapshot if one is due and none is in flight.
  // Called with the handle's lock held.
  void Poke(bool force);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void SendLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<engine::Transfer> transfer_;
  const absl::Duration interval_;
  const std::shared_ptr<TransferWatchHandle> handle_;

  Mutex mu_;
  v1::Transfer snapshot_ ABSL_GUARDED_BY(mu_);
  absl::Time next_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool sent_terminal_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace xferd::service
