// Work a poller does on every pass besides its transfers and its worker: a
// local client's submission ring, served by the poller its session is
// attached to, so a request goes from the client's memory to the lane with no
// other thread in between. Like the worker, a source can make its poller
// sleep only when it has nothing to do, and wakes it through an fd.
#pragma once

#include <cstdint>

namespace xferd::engine {

class PollSource {
 public:
  virtual ~PollSource() = default;
  // Poller thread: takes what there is to take; returns how much (0: idle).
  virtual uint32_t Poll() = 0;
  // Poller thread, about to sleep: false if work arrived meanwhile (then
  // the poller passes again instead). True commits the source to wake the
  // poller through wake_fd() when work comes.
  virtual bool PrepareToSleep() = 0;
  // Readable once work may be there after PrepareToSleep returned true.
  virtual int wake_fd() const = 0;
};

}  // namespace xferd::engine
