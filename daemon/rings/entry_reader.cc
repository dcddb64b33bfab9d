#include "daemon/rings/entry_reader.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/engine/block_spec.h"
#include "daemon/engine/priority.h"

namespace xferd::rings {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "ring arrays are little-endian and copied as they are");

// Bytes of one strided run in an entry's arrays: six uint64.
constexpr size_t kRunBytes = 6 * sizeof(uint64_t);

// The `bytes` of arrays an entry says are at `offset` (buffer) or inline:
// bounded first, then handed out for copying.
absl::StatusOr<absl::Span<const std::byte>> Locate(const Sqe& e, const EntryArrays& arrays,
                                                   uint64_t bytes) {
  if (e.ext > 0) {
    if (e.form != kFormRange && e.c != 0) {
      return absl::InvalidArgumentError(
          "c must be 0 when the arrays are inline (ext > 0): they follow the entry");
    }
    if (bytes > arrays.inline_slots.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the arrays take ", bytes, " bytes but the entry's ", int{e.ext},
                       " inline slots hold ", arrays.inline_slots.size()));
    }
    return arrays.inline_slots.subspan(0, bytes);
  }
  const uint64_t size = arrays.buffer.size();
  if (e.c > size || bytes > size - e.c) {
    return absl::InvalidArgumentError(absl::StrCat("the arrays at buffer offset ", e.c, " (",
                                                   bytes, " bytes) exceed the buffer area of ",
                                                   size, " bytes"));
  }
  return arrays.buffer.subspan(e.c, bytes);
}

template <typename T>
std::vector<T> CopyOut(absl::Span<const std::byte> from, size_t count) {
  std::vector<T> out(count);
  if (count > 0) std::memcpy(out.data(), from.data(), count * sizeof(T));
  return out;
}

absl::Status CheckCount(uint64_t count, const char* what) {
  if (count == 0 || count > engine::kMaxRequestBlocks) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", count, ": give 1 to ",
                                                   engine::kMaxRequestBlocks));
  }
  return absl::OkStatus();
}

// The bytes of the form's arrays (a range has none), their count checked.
absl::StatusOr<uint64_t> ArrayBytes(const Sqe& e) {
  switch (e.form) {
    case kFormRange:
      return 0;
    case kFormList:
      RETURN_IF_ERROR(CheckCount(e.a, "a (the block count)"));
      return e.a * (e.b == 0 ? 3 : 2) * sizeof(uint64_t);
    case kFormStrided:
      RETURN_IF_ERROR(CheckCount(e.a, "a (the run count)"));
      return e.a * kRunBytes;
    case kFormLayout:
      RETURN_IF_ERROR(CheckCount(e.a, "a (the block count)"));
      return e.a * 2 * sizeof(uint32_t);
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("form ", int{e.form}, " is unknown: 0 range, 1 list, 2 strided, 3 layout"));
  }
}

// The blocks of a list, runs or layout from their arrays, `at` (bounded).
void ReadBlocks(const Sqe& e, absl::Span<const std::byte> at, engine::BlockSpec* b) {
  switch (e.form) {
    case kFormList: {
      const uint64_t n = e.a;
      b->form = engine::BlockSpec::Form::kList;
      b->block_length = e.b;
      b->src_offsets = CopyOut<uint64_t>(at, n);
      b->dst_offsets = CopyOut<uint64_t>(at.subspan(n * 8), n);
      if (e.b == 0) b->lengths = CopyOut<uint64_t>(at.subspan(n * 16), n);
      return;
    }
    case kFormStrided: {
      b->form = engine::BlockSpec::Form::kStrided;
      const std::vector<uint64_t> words = CopyOut<uint64_t>(at, e.a * 6);
      b->runs.resize(e.a);
      for (uint64_t r = 0; r < e.a; ++r) {
        const uint64_t* w = &words[r * 6];
        b->runs[r] = engine::StridedRun{w[0], w[1], w[2], w[3], w[4], w[5]};
      }
      return;
    }
    default: {  // kFormLayout (ArrayBytes knows no other)
      const uint64_t n = e.a;
      b->form = engine::BlockSpec::Form::kLayout;
      b->src_indices = CopyOut<uint32_t>(at, n);
      b->dst_indices = CopyOut<uint32_t>(at.subspan(n * 4), n);
      return;
    }
  }
}

absl::Status CheckHeader(const Sqe& e) {
  if (e.opcode != kOpWrite && e.opcode != kOpRead) {
    return absl::InvalidArgumentError(
        absl::StrCat("opcode ", int{e.opcode}, " is unknown: 1 write, 2 read"));
  }
  if ((e.flags & ~(kFlagQueuedNotice | kFlagDetached | kFlagVerify | kFlagNoVerify)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("flags ", int{e.flags}, " has unknown bits"));
  }
  if ((e.flags & kFlagVerify) != 0 && (e.flags & kFlagNoVerify) != 0) {
    return absl::InvalidArgumentError("flags ask for verify and for no verify: give one");
  }
  if (e.reserved0 != 0) return absl::InvalidArgumentError("reserved0 must be 0");
  if (engine::Priority p; !engine::PriorityFromWire(e.priority, &p)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "priority ", int{e.priority},
        " is unknown: 0 default (normal), 1 critical, 2 normal, 3 bulk, 4 background"));
  }
  if (e.ext > kMaxExt) {
    return absl::InvalidArgumentError(
        absl::StrCat("ext is ", int{e.ext}, ": at most ", kMaxExt, " inline slots"));
  }
  if (e.form == kFormRange && (e.ext != 0) != (e.expected != 0)) {
    return absl::InvalidArgumentError(
        "a range's only arrays are its expected checksums, inline: ext > 0 exactly when "
        "expected > 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RingRequest> ReadEntry(const Sqe& e, const EntryArrays& arrays,
                                      const NameTable& names) {
  RETURN_IF_ERROR(CheckHeader(e));
  RingRequest r;
  engine::TransferSpec& s = r.spec;
  s.direction = e.opcode == kOpRead ? transport::OpKind::kRead : transport::OpKind::kWrite;
  r.queued_notice = (e.flags & kFlagQueuedNotice) != 0;
  s.detached = (e.flags & kFlagDetached) != 0;
  s.user_data = e.user_data;
  ASSIGN_OR_RETURN(s.peer, names.Lookup(e.peer, "peer"));
  if (e.label != 0) {
    ASSIGN_OR_RETURN(s.label, names.Lookup(e.label, "label"));
  }
  s.slice_size = uint64_t{e.slice_kib} << 10;
  engine::PriorityFromWire(e.priority, &s.priority);  // checked by CheckHeader
  if (e.timeout_ms != 0) s.timeout = absl::Milliseconds(e.timeout_ms);
  // Expected checksums on a write, or with verify off, are the engine's to
  // refuse, with gRPC's words.
  if ((e.flags & kFlagVerify) != 0) s.verify = true;
  if ((e.flags & kFlagNoVerify) != 0) s.verify = false;
  if (e.form == kFormLayout) {
    // The layouts name their regions (the engine binds them).
    ASSIGN_OR_RETURN(s.blocks.src_layout, names.Lookup(e.src, "src (a layout)"));
    ASSIGN_OR_RETURN(s.blocks.dst_layout, names.Lookup(e.dst, "dst (a layout)"));
  } else {
    ASSIGN_OR_RETURN(s.src_region, names.Lookup(e.src, "src"));
    ASSIGN_OR_RETURN(s.dst_region, names.Lookup(e.dst, "dst"));
  }
  if (e.form == kFormRange) {
    s.src_offset = e.a;
    s.dst_offset = e.b;
    s.length = e.c;
  }
  ASSIGN_OR_RETURN(const uint64_t array_bytes, ArrayBytes(e));
  const uint64_t expected_bytes = uint64_t{e.expected} * sizeof(uint64_t);
  if (array_bytes + expected_bytes == 0) return r;
  ASSIGN_OR_RETURN(absl::Span<const std::byte> at, Locate(e, arrays, array_bytes + expected_bytes));
  if (e.form != kFormRange) ReadBlocks(e, at, &s.blocks);
  if (e.expected != 0) {
    s.expected_checksums = std::make_shared<const std::vector<uint64_t>>(
        CopyOut<uint64_t>(at.subspan(array_bytes), e.expected));
  }
  return r;
}

}  // namespace xferd::rings
