// Fuzzes the daemon's reading of a local client's submission entries
// (daemon/rings/entry_reader.h): an entry, its inline slots and the buffer
// area are memory the client can write at will. Whatever the bytes, reading
// stays inside the slots and the buffer (each an exact-size heap copy here,
// so AddressSanitizer sees any read beyond), and an entry that reads as a
// request asks for exactly what its fields say.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "daemon/base/ring_layout.h"
#include "daemon/rings/entry_reader.h"
#include "daemon/rings/name_table.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using xferd::rings::NameTable;

const NameTable& Names() {
  static const NameTable* names = [] {
    auto* t = new NameTable;
    for (const char* n : {"node-b", "src", "dst", "label"}) (void)t->Intern(n);
    return t;
  }();
  return *names;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xferd::rings;
  if (size < sizeof(Sqe)) return 0;
  Sqe e;
  std::memcpy(&e, data, sizeof(e));
  data += sizeof(e);
  size -= sizeof(e);
  // The inline slots the entry claims, as far as the input has them; the
  // rest of the input is the buffer area.
  const size_t inline_bytes = std::min<size_t>(size_t{e.ext} * sizeof(Sqe), size);
  const std::vector<std::byte> slots(reinterpret_cast<const std::byte*>(data),
                                     reinterpret_cast<const std::byte*>(data) + inline_bytes);
  const std::vector<std::byte> buffer(reinterpret_cast<const std::byte*>(data) + inline_bytes,
                                      reinterpret_cast<const std::byte*>(data) + size);
  const absl::StatusOr<RingRequest> r =
      ReadEntry(e, EntryArrays{absl::MakeConstSpan(slots), absl::MakeConstSpan(buffer)}, Names());
  if (!r.ok()) {
    FUZZ_CHECK(!r.status().message().empty());  // a refusal says why
    return 0;
  }
  const xferd::engine::TransferSpec& s = r->spec;
  FUZZ_CHECK(e.opcode == kOpWrite || e.opcode == kOpRead);
  FUZZ_CHECK((s.direction == xferd::transport::OpKind::kRead) == (e.opcode == kOpRead));
  FUZZ_CHECK(e.priority <= 4 && e.reserved0 == 0);
  FUZZ_CHECK(xferd::engine::PriorityToWire(s.priority) == (e.priority == 0 ? 2u : e.priority));
  FUZZ_CHECK((e.flags & ~(kFlagQueuedNotice | kFlagDetached | kFlagVerify | kFlagNoVerify)) == 0);
  // verify as asked (never both ways); the expected checksums as many as given.
  FUZZ_CHECK(s.verify == ((e.flags & kFlagVerify) != 0     ? std::optional<bool>(true)
                          : (e.flags & kFlagNoVerify) != 0 ? std::optional<bool>(false)
                                                           : std::nullopt));
  FUZZ_CHECK((e.flags & kFlagVerify) == 0 || (e.flags & kFlagNoVerify) == 0);
  FUZZ_CHECK(e.expected == 0
                 ? s.expected_checksums == nullptr
                 : s.expected_checksums != nullptr && s.expected_checksums->size() == e.expected);
  FUZZ_CHECK(r->queued_notice == ((e.flags & kFlagQueuedNotice) != 0));
  FUZZ_CHECK(s.user_data == e.user_data);
  FUZZ_CHECK(s.peer == *Names().Lookup(e.peer, "peer"));
  FUZZ_CHECK(s.slice_size == uint64_t{e.slice_kib} << 10);
  FUZZ_CHECK(e.ext <= kMaxExt);
  if (e.form == kFormRange) {
    FUZZ_CHECK((e.ext == 0) == (e.expected == 0));
    FUZZ_CHECK(s.src_offset == e.a && s.dst_offset == e.b && s.length == e.c);
  } else {
    FUZZ_CHECK(e.form == kFormList || e.form == kFormStrided || e.form == kFormLayout);
    FUZZ_CHECK(e.ext > 0 ? e.c == 0 : e.c <= buffer.size());
  }
  return 0;
}
