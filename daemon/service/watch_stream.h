// What the server streams that follow the data path (WatchRegion,
// WatchTransfer) share: one message in flight at a time, built and started on
// the watch thread or on gRPC's thread after the previous one was written
// (never on a poller); the end of the stream decided once (after its last
// message, or when the client goes away or cancels); and a task on the watch
// loop, detached before the reactor deletes itself.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>

#include "absl/base/thread_annotations.h"
#include "daemon/base/mutex.h"
#include "daemon/service/watch_loop.h"

namespace xferd::service {

template <typename Message>
class WatchStream : public grpc::ServerWriteReactor<Message>, public WatchTask {
 public:
  // gRPC's threads.
  void OnWriteDone(bool ok) final {
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watcher went away"));
    } else if (sent_last_) {
      FinishLocked(grpc::Status::OK);
    } else {
      OnWrittenLocked();
    }
  }
  void OnCancel() final {
    MutexLock lock(&mu_);
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
  }
  void OnDone() final {
    OnStreamDone();
    handle_->Detach();
    delete this;
  }

 protected:
  WatchStream() = default;
  ~WatchStream() override = default;

  // Last thing in the subclass's constructor: the loop may run it at once.
  void Attach(WatchLoop& loop) { handle_ = loop.Add(this); }
  // Whether a message may be written now: none in flight, the last one not
  // sent, the stream not finished.
  bool IdleLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !writing_ && !sent_last_ && !finished_;
  }
  // Starts writing message_, which the caller filled while IdleLocked().
  // last: the stream ends once it is written.
  void WriteLocked(bool last) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    writing_ = true;
    sent_last_ = last;
    this->StartWrite(&message_);
  }
  // gRPC's thread: a message was written and the stream goes on.
  virtual void OnWrittenLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) = 0;
  // gRPC's thread, once, before the reactor is deleted.
  virtual void OnStreamDone() {}

  Mutex mu_;
  Message message_ ABSL_GUARDED_BY(mu_);  // in flight while writing
  std::shared_ptr<WatchHandle> handle_;   // set by Attach, then constant

 private:
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    this->Finish(status);
  }

  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool sent_last_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace xferd::service
