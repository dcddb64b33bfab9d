// What the pollers only take note of, finished on a thread of its own
// (xferd-notes): a transfer's end (history, metrics, logs, a read's landed
// event, the observers that reply to clients) and a peer's write that landed
// here (its landed event: the region's hub, staged ranges, watchers). A
// poller's part is one push into a bounded queue; nothing it does there
// blocks, looks a string up or logs. Within a poller's pass (Batch) the
// pushes wake the thread once, after the pass's own I/O went out.
#pragma once

#include <functional>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/common/wake_inbox.h"
#include "daemon/engine/transfer.h"
#include "daemon/transport/transport.h"

namespace xferd::engine {

class Notes {
 public:
  // What the thread does with an ended transfer (the TransferRunner's
  // bookkeeping); landings it announces itself.
  using EndedFn = std::function<void(Transfer& transfer)>;

  // At most `capacity` notes wait at once (preallocated); the thread starts
  // here. RESOURCE_EXHAUSTED without an eventfd.
  static absl::StatusOr<std::unique_ptr<Notes>> Create(size_t capacity, EndedFn ended);
  ~Notes();  // Stop()

  // Any thread: `transfer` ended and its end is visible; the table keeps it
  // whole until the thread is done with it. When the queue is full (the
  // thread is far behind), the caller does the work itself: the end is
  // never lost, it only costs that caller more.
  void Ended(Transfer& transfer);
  // Any thread, the same for a peer's write that landed.
  void Landed(const transport::Landing& landing);

  // One pass of a poller: notes this thread takes while it lives wake the
  // notes thread once, when it ends, instead of one eventfd write each in
  // the middle of the pass. The acknowledgements and ring completions the
  // pass sends go first, and a busy poller costs one wake-up per pass.
  class Batch {
   public:
    explicit Batch(Notes& notes);
    ~Batch();
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;

   private:
    friend class Notes;
    Notes& notes_;
    Batch* const outer_;
    bool owed_ = false;  // a note was queued without a wake
  };

  // Finishes what is queued, then joins. Idempotent. Notes taken after it
  // are done by their caller.
  void Stop();

 private:
  struct Note {
    Transfer* ended = nullptr;  // or a landing:
    transport::Landing landing;
  };
  Notes(std::unique_ptr<WakeInbox<Note>> inbox, EndedFn ended);
  void Run();
  void Handle(Note& note);
  // Queues `note`, waking the thread now or at the end of this thread's
  // Batch; false when the queue is full.
  bool Push(Note note);

  const std::unique_ptr<WakeInbox<Note>> inbox_;
  const EndedFn ended_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stopped_{false};
  std::thread thread_;
};

}  // namespace xferd::engine
