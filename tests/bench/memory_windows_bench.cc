// What binding region keys to their peer's link (type-2 memory windows)
// costs, beside the MRs' own keys (transport.verbs_memory_windows = false),
// in one run on this machine's RDMA device: registration, the handshake, the
// grant a ResolveRegion makes (first, repeated, and of a region of many MR
// chunks), and write throughput. Both modes run side by side (a writer and
// an owner each) and every figure is sampled in pairs, the two modes one
// right after the other, the first of a pair alternating: load on the host
// (a TCG VM shares two cores) weighs on both alike. Run it where there is a
// device:
//   tests/softroce/vm_run.sh -- bazel-bin/tests/bench/memory_windows_bench
// Prints a table (median and best sample per mode), then one JSON line.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tests/transport/verbs_nodes.h"

namespace xferd::transport::testing {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr int kSamples = 15;
constexpr uint64_t kRegion = 64 * kMiB;        // registered
constexpr uint64_t kChunk = 16 * kMiB;         // the MR chunk: a 16 MiB region is one
constexpr uint64_t kManyChunks = 256 * kMiB;  // 16 chunks: 32 windows on 2 lanes
constexpr uint64_t kWritten = 32 * kMiB;
constexpr uint32_t kSlice = 1 << 20;
constexpr memory::Access kWritable{true, false};

double Ms(absl::Time since) { return absl::ToDoubleMilliseconds(absl::Now() - since); }

// One mode: owner a, writer b, their first link, and its samples.
struct Mode {
  bool windows = true;
  VerbsNodes nodes;
  VerbsNode* a = nullptr;
  VerbsNode* b = nullptr;
  LinkEnds link;
  std::shared_ptr<memory::Region> src, dst;
  RemoteRegion dst_key;
  std::vector<double> register_ms, handshake_ms, grant_first_ms, grant_again_ms, grant_many_ms,
      write_mbps;
};

absl::Status SetUp(Mode& m) {
  absl::StatusOr<VerbsNode*> a = m.nodes.Add(m.windows ? "a" : "a-mr", m.windows, kChunk);
  if (!a.ok()) return a.status();
  absl::StatusOr<VerbsNode*> b = m.nodes.Add(m.windows ? "b" : "b-mr", m.windows, kChunk);
  if (!b.ok()) return b.status();
  m.a = *a;
  m.b = *b;
  absl::StatusOr<LinkEnds> link = m.nodes.Connect(*m.b, *m.a);
  if (!link.ok()) return link.status();
  m.link = *std::move(link);
  m.src = m.nodes.Register(*m.b, "src", kWritten, {});
  m.dst = m.nodes.Register(*m.a, "dst", kWritten, kWritable);
  if (m.src == nullptr || m.dst == nullptr) return absl::ResourceExhaustedError("registering");
  absl::StatusOr<RemoteRegion> key = m.nodes.Grant(*m.a, *m.link.responder, *m.dst);
  if (!key.ok()) return key.status();
  m.dst_key = *std::move(key);
  return absl::OkStatus();
}

// Writes all of src into dst in kSlice ops over both lanes, as many in
// flight as the lanes take; MB/s.
absl::StatusOr<double> WriteAll(Mode& m) {
  std::vector<uint64_t> cookies;
  const absl::Time start = absl::Now();
  for (uint64_t offset = 0; offset < kWritten; offset += kSlice) {
    const uint32_t lane = static_cast<uint32_t>(offset / kSlice) % VerbsNodes::kPollers;
    cookies.push_back(m.nodes.PostWrite(*m.b, *m.link.initiator, lane, *m.src, m.dst_key, offset,
                                        kSlice));
  }
  for (uint64_t c : cookies) {
    if (absl::Status s = m.nodes.Wait(*m.b, c); !s.ok()) return s;
  }
  return static_cast<double>(kWritten) / 1e6 / absl::ToDoubleSeconds(absl::Now() - start);
}

// A first grant of a fresh region of `size` (its windows are new), and, if
// `again`, a second one (the same windows); the region goes after.
absl::Status Grants(Mode& m, uint64_t size, std::vector<double>* first,
                    std::vector<double>* again) {
  auto region = m.nodes.Register(*m.a, "granted", size, kWritable);
  if (region == nullptr) return absl::ResourceExhaustedError("registering");
  absl::Time start = absl::Now();
  if (absl::Status s = m.nodes.Grant(*m.a, *m.link.responder, *region).status(); !s.ok()) return s;
  first->push_back(Ms(start));
  if (again != nullptr) {
    start = absl::Now();
    if (absl::Status s = m.nodes.Grant(*m.a, *m.link.responder, *region).status(); !s.ok()) {
      return s;
    }
    again->push_back(Ms(start));
  }
  return m.a->regions->Remove("granted", /*force=*/true).status();
}

// One sample of every figure in mode `m`.
absl::Status Sample(Mode& m) {
  absl::Time start = absl::Now();
  absl::StatusOr<LinkEnds> link = m.nodes.Connect(*m.b, *m.a);
  if (!link.ok()) return link.status();
  m.handshake_ms.push_back(Ms(start));
  link->initiator->Close(absl::CancelledError("sampled"));
  link->responder->Close(absl::CancelledError("sampled"));
  start = absl::Now();
  auto region = m.nodes.Register(*m.a, "registered", kRegion, kWritable);
  if (region == nullptr) return absl::ResourceExhaustedError("registering");
  m.register_ms.push_back(Ms(start));
  if (absl::Status s = m.a->regions->Remove("registered", /*force=*/true).status(); !s.ok()) {
    return s;
  }
  if (absl::Status s = Grants(m, kChunk, &m.grant_first_ms, &m.grant_again_ms); !s.ok()) return s;
  if (absl::Status s = Grants(m, kManyChunks, &m.grant_many_ms, nullptr); !s.ok()) return s;
  absl::StatusOr<double> rate = WriteAll(m);
  if (!rate.ok()) return rate.status();
  m.write_mbps.push_back(*rate);
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The best sample: the least disturbed by the host's other load.
double Best(const std::vector<double>& v, bool higher_is_better) {
  if (v.empty()) return 0;
  return higher_is_better ? *std::max_element(v.begin(), v.end())
                          : *std::min_element(v.begin(), v.end());
}

void Row(const char* what, const std::vector<double>& on, const std::vector<double>& off,
         const char* unit) {
  const bool rate = std::string(unit) == "MB/s";
  const double a = Median(on), b = Median(off);
  std::printf("%-46s %8.2f (%7.2f) %8.2f (%7.2f) %5s %+7.1f%%\n", what, a, Best(on, rate), b,
              Best(off, rate), unit, b == 0 ? 0.0 : 100.0 * (a - b) / b);
}

std::string Json(const char* key, const std::vector<double>& on, const std::vector<double>& off) {
  return absl::StrFormat("\"%s\": {\"windows\": %.3f, \"mr_keys\": %.3f}", key, Median(on),
                         Median(off));
}

int Main() {
  Mode on, off;
  off.windows = false;
  for (Mode* m : {&on, &off}) {
    if (absl::Status s = SetUp(*m); !s.ok()) {
      std::fprintf(stderr, "memory_windows_bench: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  for (int i = 0; i < kSamples; ++i) {
    for (Mode* m : i % 2 == 0 ? std::vector<Mode*>{&on, &off} : std::vector<Mode*>{&off, &on}) {
      if (absl::Status s = Sample(*m); !s.ok()) {
        std::fprintf(stderr, "memory_windows_bench: %s\n", s.ToString().c_str());
        return 1;
      }
    }
  }
  std::printf("median (best) of %d paired samples, 2 lanes, 1 device   windows            "
              "MR keys\n",
              kSamples);
  Row("register 64 MiB (remote write)", on.register_ms, off.register_ms, "ms");
  Row("handshake (create, accept, connect, ready)", on.handshake_ms, off.handshake_ms, "ms");
  Row("grant 16 MiB, first (1 chunk: 2 windows)", on.grant_first_ms, off.grant_first_ms, "ms");
  Row("grant 16 MiB again (windows reused)", on.grant_again_ms, off.grant_again_ms, "ms");
  Row("grant 256 MiB, first (16 chunks: 32 windows)", on.grant_many_ms, off.grant_many_ms, "ms");
  Row("write 32 MiB in 1 MiB ops", on.write_mbps, off.write_mbps, "MB/s");
  std::printf("{%s, %s, %s, %s, %s, %s}\n",
              Json("register_ms", on.register_ms, off.register_ms).c_str(),
              Json("handshake_ms", on.handshake_ms, off.handshake_ms).c_str(),
              Json("grant_first_ms", on.grant_first_ms, off.grant_first_ms).c_str(),
              Json("grant_again_ms", on.grant_again_ms, off.grant_again_ms).c_str(),
              Json("grant_many_ms", on.grant_many_ms, off.grant_many_ms).c_str(),
              Json("write_mbps", on.write_mbps, off.write_mbps).c_str());
  return 0;
}

}  // namespace
}  // namespace xferd::transport::testing

int main() { return xferd::transport::testing::Main(); }
