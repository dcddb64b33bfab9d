// One local client's request rings (docs/local-rings.md): their shared
// memory and doorbells, the names the client interned, and both directions
// of its traffic. The poller the session is attached to takes its
// submissions (PollSource): copies each entry out, reads it, hands the
// request to the engine right there, and answers refusals at once; whoever
// ends one of its transfers writes the completion (CompletionPort). The
// client can only hurt itself: bad entries get errors, a client that stops
// reaping finds its submissions wait, and no index it writes is trusted.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/engine/engine.h"
#include "daemon/rings/entry_reader.h"
#include "daemon/rings/name_table.h"
#include "daemon/rings/ring_memory.h"

namespace xferd::rings {

// Who opened a session: the local socket's peer credentials.
struct LocalClient {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;  // as the client calls itself, for logs
  // Its tenant, by its uid and gid (engine::Tenants): its transfers' own.
  const engine::Tenant* tenant = nullptr;
};

struct SessionCounters {
  std::atomic<uint64_t> submitted{0};  // entries taken
  std::atomic<uint64_t> refused{0};    // of those, answered with an error at once
  std::atomic<uint64_t> completed{0};  // completions written
};

class RingSession final : public engine::PollSource,
                          public engine::CompletionPort,
                          public std::enable_shared_from_this<RingSession> {
 public:
  // The rings' memory and doorbells, not yet served. `engine` outlives the
  // session. RESOURCE_EXHAUSTED as RingMemory::Create.
  static absl::StatusOr<std::shared_ptr<RingSession>> Create(uint64_t id, const RingSizes& sizes,
                                                             LocalClient client,
                                                             engine::Engine& engine);
  ~RingSession() override;

  uint64_t id() const { return id_; }
  const LocalClient& client() const { return client_; }
  const RingMemory& memory() const { return *memory_; }
  NameTable& names() { return names_; }
  const SessionCounters& counters() const { return counters_; }

  // Control thread, once the client has the descriptors: a poller serves
  // the rings from now on.
  void Start();
  // Control thread, when the client's socket closed (or its process died):
  // stops serving, says closed in the header, ends its transfers still in
  // flight but the detached ones (kFlagDetached), which run on with their
  // completions dropped. Its memory and descriptors go with the last
  // transfer that still holds the session. Idempotent.
  void Close();
  bool closed() const { return closed_.load(std::memory_order_acquire); }

  // PollSource: the poller serving this session.
  uint32_t Poll() override;
  bool PrepareToSleep() override;
  int wake_fd() const override { return memory_->submit_fd(); }

  // CompletionPort: one of its transfers ended (any thread).
  void OnTransferEnded(const engine::Transfer& transfer) override;

 private:
  RingSession(uint64_t id, std::unique_ptr<RingMemory> memory, LocalClient client,
              engine::Engine& engine);

  // Poller thread: whether the entry at sq_head_ (copied into *entry) is
  // whole and the CQ has room for its answers.
  bool EntryReady(uint64_t tail, Sqe* entry);
  uint64_t InlineSlots(const Sqe& entry) const;
  // Poller thread: takes the entry at sq_head_ if it is ready; false to
  // stop taking for now.
  bool TakeEntry(uint64_t tail);
  // Hands a request read from the ring to the engine.
  void Submit(RingRequest request);
  // Room in the CQ for `n` more completions than are reserved.
  bool HasCqRoom(uint32_t n);
  // The client's CQ head as the daemon may believe it: never behind what it
  // read before, never past what was written.
  uint64_t ClientCqHead();
  // Any thread: writes a completion at the next position and rings the
  // client if it waits. Its slot holds `checksums` if any (kCqeChecksums),
  // else the status's message.
  void Complete(uint64_t user_data, uint64_t transfer_id, uint8_t state, uint8_t flags,
                const absl::Status& status, uint64_t bytes, uint64_t length, uint64_t blocks,
                uint32_t slices, absl::Duration duration,
                absl::Span<const uint64_t> checksums = {});
  void Refuse(uint64_t user_data, const absl::Status& status, bool unreserve_notice);
  // A queued notice for `transfer`, unless it already ended.
  void NoticeQueued(const engine::Transfer& transfer);
  // The client broke the ring's rules beyond one entry (indices out of the
  // ring): the session stops serving; the client sees `closed` set.
  void Corrupt(const char* why);

  const uint64_t id_;
  const std::unique_ptr<RingMemory> memory_;
  const LocalClient client_;
  engine::Engine& engine_;
  NameTable names_;
  SessionCounters counters_;
  uint32_t poller_ = 0;  // set by Start

  // Poller thread only.
  uint64_t sq_head_ = 0;       // entries taken, published as header.sq_head
  uint64_t cq_seen_head_ = 0;  // ClientCqHead's floor
  bool idle_ = false;          // daemon_idle set: drain the doorbell on waking
  bool corrupt_ = false;

  // Completion positions: reserved by the poller for the entries it takes,
  // claimed by whoever writes one; claimed <= reserved always.
  std::atomic<uint64_t> cq_reserved_{0};
  std::atomic<uint64_t> cq_claimed_{0};
  std::atomic<bool> closed_{false};
  std::atomic<bool> started_{false};
};

}  // namespace xferd::rings
