// The candidates for a verified transfer's block checksum
// (docs/integrity.md), on this CPU: CRC32C one 8-byte word at a time with
// the SSE4.2 instruction, ISA-L's folded CRC32C and CRC-64 (the one the
// daemon uses: memory/checksum.h), XXH3-64 from Debian's libxxhash, each
// beside memcpy of the same bytes measured in the same run. 4 KiB and
// 1 MiB blocks, over a buffer that fits in cache and one that does not.
//
//   bazel run --config=opt //tests/bench:checksum_bench [-- --seconds 0.5]
#include <isa-l/crc.h>
#include <isa-l/crc64.h>
#include <nmmintrin.h>
#include <xxhash.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "CLI/CLI.hpp"
#include "daemon/memory/checksum.h"

namespace {

using Sum = std::function<uint64_t(const uint8_t*, size_t)>;

// The instruction alone, as code built for x86-64-v2 would use it (the
// build's baseline is x86-64, hence the attribute).
__attribute__((target("sse4.2"))) uint64_t Crc32cSse42(const uint8_t* p, size_t n) {
  uint64_t crc = 0xFFFFFFFFu;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    crc = _mm_crc32_u64(crc, word);
  }
  for (; n > 0; --n) crc = _mm_crc32_u8(static_cast<uint32_t>(crc), *p++);
  return ~crc & 0xFFFFFFFFu;
}

// GB/s of `sum` over every `block`-byte block of `buffer`, repeated for at
// least `seconds`.
double Rate(const Sum& sum, const std::vector<uint8_t>& buffer, size_t block, double seconds) {
  uint64_t sink = 0;
  size_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  do {
    for (size_t at = 0; at + block <= buffer.size(); at += block) {
      sink += sum(buffer.data() + at, block);
      bytes += block;
    }
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < seconds);
  if (sink == 42) std::puts("");  // keeps the sums
  return static_cast<double>(bytes) / elapsed / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"block checksum candidates against memcpy"};
  double seconds = 0.5;
  app.add_option("--seconds", seconds, "per figure");
  CLI11_PARSE(app, argc, argv);

  std::vector<uint8_t> copy_to(1 << 20);
  const std::vector<std::pair<const char*, Sum>> candidates = {
      {"memcpy (reference)",
       [&](const uint8_t* p, size_t n) {
         std::memcpy(copy_to.data(), p, n);
         return uint64_t{copy_to[n / 2]};
       }},
      {"CRC32C, SSE4.2 word loop", Crc32cSse42},
      {"CRC32C, ISA-L (folded)",
       [](const uint8_t* p, size_t n) {
         return uint64_t{crc32_iscsi(const_cast<uint8_t*>(p), n, ~0u)};
       }},
      {"CRC-64/XZ, ISA-L (xferd)",
       [](const uint8_t* p, size_t n) {
         return xferd::memory::BlockChecksum(reinterpret_cast<const std::byte*>(p), n);
       }},
      {"XXH3-64, libxxhash", [](const uint8_t* p, size_t n) { return XXH3_64bits(p, n); }},
  };
  std::printf("%-26s %10s %10s %12s %12s\n", "", "buffer", "block", "GB/s", "x memcpy");
  for (const size_t buffer_bytes : {size_t{1} << 20, size_t{256} << 20}) {
    std::vector<uint8_t> buffer(buffer_bytes);
    for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<uint8_t>(i * 7 + (i >> 9));
    for (const size_t block : {size_t{4096}, size_t{1} << 20}) {
      double reference = 0;
      for (const auto& [name, sum] : candidates) {
        const double rate = Rate(sum, buffer, block, seconds);
        if (reference == 0) reference = rate;
        std::printf("%-26s %7zu KiB %6zu KiB %12.1f %12.2f\n", name, buffer_bytes >> 10,
                    block >> 10, rate, rate / reference);
      }
    }
  }
  return 0;
}
