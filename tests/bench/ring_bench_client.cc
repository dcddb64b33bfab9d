// ring_bench_client: the C++ figures of tests/bench/ring_bench.py. Drives one
// daemon's request rings (client::LocalRings) or, for the reference, its gRPC
// write path, and prints one JSON line per run:
//   lat    one write of --size bytes at a time through the rings: submit ->
//          completion seen, latency percentiles, client CPU per request.
//   rate   --depth writes in flight through the rings, completions reaped in
//          batches: transfers/s and client CPU per request.
//   grpc   the same as lat through Client::Write(wait) over gRPC.
// With --verify-dst-target (the destination daemon's unix target; both
// regions SHM), the destination is compared with the source at the end,
// each mapped through its daemon's local socket: "verified" in the JSON. Writes go
// to --slots distinct slots of --size bytes, the same offset on both sides.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "client/cpp/local_rings.h"
#include "client/cpp/local_socket.h"
#include "client/cpp/shm_region.h"
#include "client/cpp/xferd_client.h"

namespace xferd::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string target, src, peer, dst, verify_dst_target;
  uint64_t size = 4096;
  uint32_t depth = 64;
  uint32_t slots = 256;
  double seconds = 3;
  double spin_us = -1;  // < 0: the client's default
};

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p / 100 * static_cast<double>(v.size())))];
}

client::RingRequest Write(const Args& a, uint64_t slot) {
  client::RingRequest r;
  r.peer = a.peer;
  r.src = a.src;
  r.dst = a.dst;
  r.a = r.b = (slot % a.slots) * a.size;
  r.length = a.size;
  return r;
}

absl::Status Check(const client::RingCompletion& c) {
  if (c.state == rings::kStateDone) return absl::OkStatus();
  return c.status.ok() ? absl::InternalError("a write did not end done") : c.status;
}

// Times `op` back to back for a.seconds.
template <typename Op>
absl::Status Loop(const Args& a, const char* mode, Op op) {
  std::vector<double> us;
  const double cpu = CpuSeconds();
  const auto start = Clock::now();
  const auto stop =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  for (uint64_t i = 0; Clock::now() < stop; ++i) {
    const auto begin = Clock::now();
    if (absl::Status s = op(i); !s.ok()) return s;
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - begin).count());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu_us = (CpuSeconds() - cpu) * 1e6 / static_cast<double>(us.size());
  const size_t n = us.size();
  std::printf("{\"mode\": \"%s\", \"size\": %lu, \"ops\": %zu, \"rate\": %.1f, \"p50_us\": %.2f, "
              "\"p99_us\": %.2f, \"client_cpu_us\": %.2f",
              mode, static_cast<unsigned long>(a.size), n, static_cast<double>(n) / seconds,
              Percentile(us, 50), Percentile(us, 99), cpu_us);
  return absl::OkStatus();
}

absl::Status Rate(client::LocalRings& rings, const Args& a) {
  uint64_t submitted = 0, done = 0;
  const double cpu = CpuSeconds();
  const auto start = Clock::now();
  const auto stop =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(a.seconds));
  const uint32_t depth = std::min(a.depth, rings.capacity());
  while (true) {
    const bool more = Clock::now() < stop;
    while (more && submitted - done < depth) {
      absl::StatusOr<uint64_t> id = rings.Submit(Write(a, submitted));
      if (!id.ok()) return id.status();
      ++submitted;
    }
    if (submitted == done) break;
    for (const client::RingCompletion& c : rings.Reap(depth, absl::Now() + absl::Seconds(10))) {
      if (absl::Status s = Check(c); !s.ok()) return s;
      ++done;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("{\"mode\": \"rate\", \"size\": %lu, \"depth\": %u, \"ops\": %lu, \"rate\": %.1f, "
              "\"client_cpu_us\": %.2f",
              static_cast<unsigned long>(a.size), depth, static_cast<unsigned long>(done),
              static_cast<double>(done) / seconds,
              (CpuSeconds() - cpu) * 1e6 / static_cast<double>(done));
  return absl::OkStatus();
}

absl::Status Run(const std::string& mode, const Args& a) {
  if (mode == "grpc") {
    client::ClientOptions options;
    options.rings = false;
    auto c = client::Client::Connect(a.target, absl::Seconds(10), options);
    if (!c.ok()) return c.status();
    return Loop(a, "grpc", [&](uint64_t i) {
      v1::WriteRequest w;
      w.set_src_region(a.src);
      w.set_peer(a.peer);
      w.set_dst_region(a.dst);
      w.set_src_offset((i % a.slots) * a.size);
      w.set_dst_offset((i % a.slots) * a.size);
      w.set_length(a.size);
      w.set_wait(true);
      absl::StatusOr<v1::Transfer> t = (*c)->Write(w);
      return t.ok() ? client::TransferOutcome(*t) : t.status();
    });
  }
  client::RingOptions options;
  options.own_completions = mode == "rate";
  options.client_name = "ring_bench_client";
  if (a.spin_us >= 0) options.spin = absl::Microseconds(a.spin_us);
  auto rings = client::LocalRings::Open(a.target.substr(5) + ".local", options);
  if (!rings.ok()) return rings.status();
  if (mode == "rate") return Rate(**rings, a);
  return Loop(a, "lat", [&](uint64_t i) -> absl::Status {
    absl::StatusOr<uint64_t> id = (*rings)->Submit(Write(a, i));
    if (!id.ok()) return id.status();
    absl::StatusOr<client::RingCompletion> c =
        (*rings)->Wait(*id, false, absl::Now() + absl::Seconds(10));
    return c.ok() ? Check(*c) : c.status();
  });
}

int Main(int argc, char** argv) {
  CLI::App app{"ring_bench_client: request-ring figures (one JSON line)"};
  Args a;
  std::string mode;
  app.add_option("mode", mode, "lat, rate or grpc")->required();
  app.add_option("--target", a.target, "unix:/path of the daemon")->required();
  app.add_option("--src", a.src)->required();
  app.add_option("--peer", a.peer)->required();
  app.add_option("--dst", a.dst)->required();
  app.add_option("--size", a.size);
  app.add_option("--depth", a.depth);
  app.add_option("--slots", a.slots);
  app.add_option("--seconds", a.seconds);
  app.add_option("--spin-us", a.spin_us, "how long the client spins before it sleeps");
  app.add_option("--verify-dst-target", a.verify_dst_target,
                 "unix target of the destination's daemon: compare the SHM regions at the end");
  CLI11_PARSE(app, argc, argv);
  absl::Status s = Run(mode, a);
  if (!s.ok()) {
    std::printf("\n");
    std::fprintf(stderr, "ring_bench_client: %s\n", s.ToString().c_str());
    return 1;
  }
  bool verified = false;
  if (!a.verify_dst_target.empty()) {
    const size_t bytes = a.size * a.slots;
    auto src = client::ShmRegion::Open(client::LocalSocketFor(a.target), a.src);
    auto dst = client::ShmRegion::Open(client::LocalSocketFor(a.verify_dst_target), a.dst);
    verified = src.ok() && dst.ok() && (*src)->size() >= bytes && (*dst)->size() >= bytes &&
               std::memcmp((*src)->data(), (*dst)->data(), bytes) == 0;
  }
  std::printf(", \"verified\": %s}\n", verified ? "true" : "false");
  return a.verify_dst_target.empty() || verified ? 0 : 1;
}

}  // namespace
}  // namespace xferd::bench

int main(int argc, char** argv) { return xferd::bench::Main(argc, argv); }
