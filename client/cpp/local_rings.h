// A local client's request rings (docs/local-rings.md): opened on the
// daemon's local socket ("<unix socket>.local"), which hands over the shared
// memory and the two doorbells. Requests go into the submission ring and come
// back in the completion ring, with no system call while both sides are busy.
// Thread-safe: any thread may submit and wait; one waiter at a time reaps for
// all, spinning briefly on the ring, then sleeping on the doorbell.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/base/ring_layout.h"

namespace xferd::client {

struct RingOptions {
  uint32_t sq_entries = 256;
  uint32_t cq_entries = 0;  // 0: twice sq_entries
  uint64_t buffer_bytes = uint64_t{16} << 20;
  // How long a waiter spins on the completion ring before it sleeps.
  absl::Duration spin = absl::Microseconds(50);
  std::string client_name;  // for the daemon's logs
  // The caller takes every completion with Reap (benchmarks) instead of
  // waiting for each with Wait; Submit then refuses beyond capacity().
  bool own_completions = false;
};

// One request, as a submission entry says it (ring_layout.h), with names
// instead of handles and its arrays packed (little-endian, in the entry's
// form: list, strided runs or layout indices).
struct RingRequest {
  uint8_t opcode = rings::kOpWrite;
  uint8_t form = rings::kFormRange;
  std::string peer, src, dst, label;  // src/dst: layout names for the layout form
  uint64_t a = 0, b = 0;  // range: src_offset, dst_offset; else count, block_length
  uint64_t length = 0;    // range only
  std::string arrays;
  uint32_t slice_kib = 0;
  uint32_t timeout_ms = 0;
  uint8_t priority = 0;  // the v1::Priority number; 0: the daemon's default
  std::optional<bool> verify;  // unset: the daemon's engine.verify
  uint32_t expected = 0;       // a read's expected checksums, at the end of `arrays`
  bool queued_notice = false;
  // Runs on if this client goes first (kFlagDetached).
  bool detached = false;
};

// What a completion says.
struct RingCompletion {
  uint64_t user_data = 0;
  uint64_t transfer_id = 0;  // 0: refused before a transfer started
  uint8_t state = 0;         // rings::State
  bool queued = false;       // a queued notice; the final completion follows
  uint64_t bytes_done = 0;
  uint64_t length = 0;  // the transfer's bytes in all
  uint64_t blocks = 0;
  uint32_t slices = 0;
  absl::Duration duration;
  absl::Status status;
  bool verified = false;  // its blocks were verified end to end
  // A verified transfer's, once done, when they fit a completion's slot
  // (packed little-endian uint64, as Transfer.checksums).
  std::string checksums;
};

class LocalRings {
 public:
  // Connects to `local_socket` and opens the rings. Errors: UNAVAILABLE
  // (no local socket there: the daemon serves none, or too old), the
  // daemon's refusal (INVALID_ARGUMENT sizes, RESOURCE_EXHAUSTED sessions).
  static absl::StatusOr<std::unique_ptr<LocalRings>> Open(const std::string& local_socket,
                                                          const RingOptions& options);
  ~LocalRings();

  // Submits `request`; returns its user_data. Waits (reaping meanwhile) only
  // while the rings hold as many requests as they can. Arrays that do not
  // fit inline go to the buffer area, once the daemon has taken the entries
  // before (it copies arrays as it takes an entry). Errors: names the daemon
  // refused to intern, arrays larger than the buffer area, the session closed
  // by the daemon.
  absl::StatusOr<uint64_t> Submit(const RingRequest& request);
  // Waits for the final completion of `user_data` (or its queued notice
  // first, with `until_queued`), up to `deadline`. DEADLINE_EXCEEDED then.
  absl::StatusOr<RingCompletion> Wait(uint64_t user_data, bool until_queued, absl::Time deadline);
  // Nobody will wait for the final completion of `user_data` (its caller
  // follows the transfer by id over gRPC): it is dropped when it comes.
  void Forget(uint64_t user_data);
  // Low level, for callers that own every completion (benchmarks): up to
  // `max` completions, waiting until `deadline` for the first. Do not mix
  // with Wait on the same rings.
  std::vector<RingCompletion> Reap(size_t max, absl::Time deadline);
  // Requests submitted whose final completion has not been reaped, and how
  // many may be (half the CQ: each may take two completions).
  uint32_t in_flight() const;
  uint32_t capacity() const {
    return std::min<uint32_t>(mapped_geometry_.sq_entries, mapped_geometry_.cq_entries / 2);
  }

 private:
  struct Mapped;
  struct Waiter {
    bool queued = false;
    bool final = false;
    bool abandoned = false;  // nobody will wait for it: drop its completions
    RingCompletion queued_completion;
    RingCompletion final_completion;
  };
  explicit LocalRings(std::unique_ptr<Mapped> mapped, RingOptions options);

  // Handles of the request's names (interned with the daemon when new).
  absl::Status HandlesFor(const RingRequest& r, uint32_t handles[4]) ABSL_LOCKS_EXCLUDED(mu_);
  // Reaps what has arrived, spinning up to the spin time and then sleeping
  // until `deadline`; returns the completions.
  std::vector<RingCompletion> ReapSome(size_t max, absl::Time deadline);
  // As the one reaper (mu_ held, released while reaping): reaps and files
  // each completion with its waiter.
  void ReapAndDispatch(absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  RingCompletion Decode(uint64_t position) const;

  const std::unique_ptr<Mapped> mapped_;
  const rings::Geometry mapped_geometry_;
  const RingOptions options_;

  Mutex socket_mu_;  // the local socket: one request at a time
  Mutex names_mu_;
  absl::flat_hash_map<std::string, uint32_t> handles_ ABSL_GUARDED_BY(names_mu_);

  Mutex submit_mu_;  // the SQ tail and the buffer area
  uint64_t sq_tail_ ABSL_GUARDED_BY(submit_mu_) = 0;
  uint64_t next_user_data_ ABSL_GUARDED_BY(submit_mu_) = 1;

  mutable Mutex mu_;  // waiters and the reaper role
  // Node-based: a waiter's entry stays put while the reaper adds others.
  absl::node_hash_map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  bool reaping_ ABSL_GUARDED_BY(mu_) = false;
  uint32_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t cq_head_ = 0;  // the reaper's
};

}  // namespace xferd::client
