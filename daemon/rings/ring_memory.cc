#include "daemon/rings/ring_memory.h"

#include <sys/eventfd.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/base/units.h"
#include "daemon/memory/sealed_memfd.h"

namespace xferd::rings {
namespace {

uint32_t RoundUpPow2(uint32_t n) {
  uint32_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

absl::Status Errno(absl::string_view what) {
  return absl::ResourceExhaustedError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<RingSizes> ChooseSizes(uint32_t sq_entries, uint32_t cq_entries,
                                      uint64_t buffer_bytes) {
  RingSizes s;
  if (sq_entries > kMaxSqEntries) {
    return absl::InvalidArgumentError(absl::StrCat("sq_entries ", sq_entries, " is over ",
                                                   kMaxSqEntries, ": ask for fewer"));
  }
  s.sq_entries = RoundUpPow2(sq_entries == 0 ? kDefaultSqEntries : sq_entries);
  const uint32_t cq = cq_entries == 0 ? 2 * s.sq_entries : cq_entries;
  if (cq > kMaxCqEntries) {
    return absl::InvalidArgumentError(absl::StrCat("cq_entries ", cq_entries, " is over ",
                                                   kMaxCqEntries, ": ask for fewer"));
  }
  s.cq_entries = RoundUpPow2(cq);
  // Each entry may have a queued notice and its end in the CQ at once.
  if (s.cq_entries < 2 * s.sq_entries) {
    return absl::InvalidArgumentError(
        absl::StrCat("cq_entries ", cq_entries, " is under twice sq_entries (", s.sq_entries,
                     "): a submission may take two completions"));
  }
  if (buffer_bytes > kMaxBufferBytes) {
    return absl::InvalidArgumentError(absl::StrCat("buffer_bytes ", buffer_bytes, " is over ",
                                                   FormatBytes(kMaxBufferBytes)));
  }
  s.buffer_bytes = buffer_bytes == 0 ? kDefaultBufferBytes : buffer_bytes;
  s.buffer_bytes = (s.buffer_bytes + kPage - 1) / kPage * kPage;
  return s;
}

absl::StatusOr<std::unique_ptr<RingMemory>> RingMemory::Create(const RingSizes& sizes) {
  const Geometry g = Layout(sizes.sq_entries, sizes.cq_entries, sizes.buffer_bytes);
  absl::StatusOr<UniqueFd> memory =
      memory::CreateSealedMemfd("xferd-rings", g.total_bytes, /*reserve=*/false);
  if (!memory.ok()) return memory.status();
  void* base = ::mmap(nullptr, g.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memory->get(), 0);
  if (base == MAP_FAILED) return Errno("mmap of the ring memory");
  UniqueFd submit(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  UniqueFd complete(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!submit.valid() || !complete.valid()) {
    ::munmap(base, g.total_bytes);
    return Errno("eventfd for a doorbell");
  }
  std::memcpy(base, &g, sizeof(g));
  return std::unique_ptr<RingMemory>(new RingMemory(sizes, g, *std::move(memory),
                                                    static_cast<std::byte*>(base),
                                                    std::move(submit), std::move(complete)));
}

RingMemory::RingMemory(RingSizes sizes, Geometry geometry, UniqueFd memory, std::byte* base,
                       UniqueFd submit, UniqueFd complete)
    : sizes_(sizes),
      geometry_(geometry),
      memory_fd_(std::move(memory)),
      base_(base),
      submit_fd_(std::move(submit)),
      complete_fd_(std::move(complete)) {}

RingMemory::~RingMemory() { ::munmap(base_, geometry_.total_bytes); }

}  // namespace xferd::rings
