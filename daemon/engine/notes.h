// What the pollers only take note of, finished on a thread of its own
// (xferd-notes): a transfer's end (history, metrics, logs, a read's landed
// event, the observers that reply to clients) and a peer's write that landed
// here (its landed event: the region's hub, staged ranges, watchers). A
// poller's part is one push into a bounded queue; nothing it does there
// blocks, looks a string up or logs. Within a poller's pass (Batch) the
// pushes wake the thread once, after the pass's own I/O went out.
//
// Most notes wait for no one: a write told to its client through a ring, a
// landing on a region nobody watches; only bookkeeping (history, metrics,
// logs) follows them. Waking the thread for each costs a context switch per
// request, which on a small host is the largest cost of a microsecond
// request. Such notes are *quiet*: queued without a wake, and the thread is
// woken for them when a note someone waits for comes, when kQuietNotes
// passes queued quiet notes, kQuietDelayNs after the first of them, or when a
// poller is about to sleep, whichever is first.
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

  // Passes with quiet notes, and how long the first may wait, before the
  // thread is woken for them.
  static constexpr uint32_t kQuietNotes = 32;
  static constexpr int64_t kQuietDelayNs = 1'000'000;

  // One pass of a poller: notes this thread takes while it lives wake the
  // notes thread once, when it ends, instead of one eventfd write each in
  // the middle of the pass, and quiet ones only as said above. The
  // acknowledgements and ring completions the pass sends go first.
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
    bool owed_ = false;   // a note someone waits for was queued without a wake
    bool quiet_ = false;  // a quiet note was
  };

  // A poller about to sleep: wakes the thread for the quiet notes queued.
  void Flush();

  // Finishes what is queued, then joins. Idempotent. Notes taken after it
  // are done by their caller. Called once the threads that take notes in
  // bulk (pollers, executor) have stopped: a note taken while Stop() ends
  // could miss both the last drain and the caller's path, and closing that
  // would cost every note a shared counter.
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
  // Batch (a quiet note: see above); false when the queue is full.
  bool Push(Note note, bool quiet);
  // The end of a poller's pass (Batch).
  void EndPass(bool owed, bool quiet);

  const std::unique_ptr<WakeInbox<Note>> inbox_;
  const EndedFn ended_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> stopped_{false};
  // Quiet notes queued without a wake: the steady-clock time of the first
  // (0: none), and the passes that queued them since.
  std::atomic<int64_t> quiet_since_ns_{0};
  std::atomic<uint32_t> quiet_passes_{0};
  std::thread thread_;
};

}  // namespace xferd::engine
