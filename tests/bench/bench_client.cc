// bench_client: the C++ half of the benchmarks in tests/bench (tcp_bench.py,
// softroce_bench.py). It drives one daemon through the C++ client library
// (xferd::client::Client) and prints one JSON line of figures per run:
//   rpc     GetNodeInfo in a loop: the bare gRPC unary round trip.
//   write   Write(wait) of a small range in a loop, on 1..N threads sharing one
//           channel (N writes in flight): transfers/s and latency percentiles.
//   verify  fills an SHM source region with a pattern, writes it into an SHM
//           region of a peer, and compares checksums of both mappings; with
//           --writes N the same pair of regions is written N times (a new
//           pattern each time), and `seconds` is the median of the writes
//           after the first, which also pays for first touches of the pages.
//   blocks  many-block requests: `count` blocks of `block` bytes in random
//           order, written (or read back) as one transfer per request, in a
//           loop; blocks/s, bytes/s and the client's submission time.
// A program, not a test: it asserts nothing about speed. Exit 1 on an error.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cpp/xferd_client.h"
#include "tests/integration/cpp/daemon_harness.h"

namespace xferd::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr absl::Duration kConnectTimeout = absl::Seconds(10);

struct LoopOptions {
  double seconds = 2;    // stop after this long ...
  uint64_t max_ops = 0;  // ... or after this many operations (0 = no bound)
  uint32_t threads = 1;  // each runs its operations one after the other
};

// What a timed loop measured: operations, wall time, per-operation latency.
struct LoopResult {
  uint64_t ops = 0;
  double seconds = 0;
  std::vector<double> latencies_us;
};

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

std::string LoopJson(const std::string& mode, const LoopOptions& options,
                     const LoopResult& result) {
  std::vector<double> sorted = result.latencies_us;
  std::sort(sorted.begin(), sorted.end());
  return absl::StrFormat(
      "{\"mode\": \"%s\", \"threads\": %d, \"ops\": %d, \"seconds\": %.4f, \"rate\": %.1f, "
      "\"p50_us\": %.1f, \"p99_us\": %.1f, \"min_us\": %.1f, \"max_us\": %.1f}",
      mode, options.threads, result.ops, result.seconds,
      result.seconds > 0 ? static_cast<double>(result.ops) / result.seconds : 0,
      Percentile(sorted, 50), Percentile(sorted, 99), sorted.empty() ? 0 : sorted.front(),
      sorted.empty() ? 0 : sorted.back());
}

// Runs `op(thread, i)` on options.threads threads until the time or the
// operation budget is spent. The first error stops every thread.
absl::StatusOr<LoopResult> TimedLoop(const LoopOptions& options,
                                     const std::function<absl::Status(uint32_t)>& op) {
  const auto start = Clock::now();
  const auto stop_at = start + std::chrono::duration<double>(options.seconds);
  std::atomic<uint64_t> claimed{0};
  std::atomic<bool> failed{false};
  std::vector<absl::Status> errors(options.threads);
  std::vector<std::vector<double>> latencies(options.threads);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < options.threads; ++t) {
    threads.emplace_back([&, t] {
      while (!failed.load() && Clock::now() < stop_at) {
        if (options.max_ops != 0 && claimed.fetch_add(1) >= options.max_ops) break;
        const auto begin = Clock::now();
        errors[t] = op(t);
        if (!errors[t].ok()) {
          failed.store(true);
          break;
        }
        latencies[t].push_back(
            std::chrono::duration<double, std::micro>(Clock::now() - begin).count());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  LoopResult result;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (uint32_t t = 0; t < options.threads; ++t) {
    if (!errors[t].ok()) return errors[t];
    result.latencies_us.insert(result.latencies_us.end(), latencies[t].begin(), latencies[t].end());
  }
  result.ops = result.latencies_us.size();
  return result;
}

absl::Status RunRpc(client::Client& client, const LoopOptions& options) {
  absl::StatusOr<LoopResult> result =
      TimedLoop(options, [&](uint32_t) { return client.GetNodeInfo().status(); });
  if (!result.ok()) return result.status();
  std::printf("%s\n", LoopJson("rpc", options, *result).c_str());
  return absl::OkStatus();
}

struct WriteArgs {
  std::string src, peer, dst;
  uint64_t length = 4096;
  uint64_t slice = 0;
};

// Thread t writes [t * length, (t + 1) * length) of both regions, so
// concurrent writes never overlap.
absl::Status RunWrites(client::Client& client, const LoopOptions& options, const WriteArgs& w) {
  absl::StatusOr<LoopResult> result = TimedLoop(options, [&](uint32_t t) -> absl::Status {
    v1::WriteRequest request;
    request.set_src_region(w.src);
    request.set_peer(w.peer);
    request.set_dst_region(w.dst);
    request.set_src_offset(t * w.length);
    request.set_dst_offset(t * w.length);
    request.set_length(w.length);
    request.set_slice_size(w.slice);
    request.set_wait(true);
    absl::StatusOr<v1::Transfer> done = client.Write(request);
    if (!done.ok()) return done.status();
    return client::TransferOutcome(*done);
  });
  if (!result.ok()) return result.status();
  std::printf("%s\n", LoopJson("write", options, *result).c_str());
  return absl::OkStatus();
}

// 64-bit FNV-1a over 8-byte words (the tail byte by byte): a checksum, not a
// cryptographic hash; any misplaced or missing slice changes it.
uint64_t Checksum(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    h = (h ^ word) * 0x100000001b3ull;
  }
  for (; i < size; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
  return h;
}

absl::StatusOr<v1::Region> RegisterShm(client::Client& client, const std::string& name,
                                       uint64_t size, bool remote_write) {
  v1::RegisterRegionRequest request;
  request.set_name(name);
  request.set_size(size);
  request.set_backing(v1::REGION_BACKING_SHM);
  request.mutable_access()->set_remote_write(remote_write);
  return client.RegisterRegion(request);
}

struct VerifyArgs {
  std::string peer_target, peer;
  uint64_t size = 64 << 20;
  uint64_t slice = 0;
  uint64_t seed = 1;
  int writes = 1;
};

absl::Status RunVerify(client::Client& src_client, const VerifyArgs& v) {
  absl::StatusOr<std::unique_ptr<client::Client>> dst_client =
      client::Client::Connect(v.peer_target, kConnectTimeout);
  if (!dst_client.ok()) return dst_client.status();
  const std::string src_name = "bench_verify_src", dst_name = "bench_verify_dst";
  absl::StatusOr<v1::Region> src = RegisterShm(src_client, src_name, v.size, false);
  if (!src.ok()) return src.status();
  absl::StatusOr<v1::Region> dst = RegisterShm(**dst_client, dst_name, v.size, true);
  if (!dst.ok()) return dst.status();
  absl::StatusOr<std::unique_ptr<client::ShmRegion>> src_map = src_client.MapShmRegion(src_name);
  if (!src_map.ok()) return src_map.status();
  absl::StatusOr<std::unique_ptr<client::ShmRegion>> dst_map =
      (*dst_client)->MapShmRegion(dst_name);
  if (!dst_map.ok()) return dst_map.status();
  const uint64_t before = Checksum((*dst_map)->data(), v.size);
  v1::WriteRequest request;
  request.set_src_region(src_name);
  request.set_peer(v.peer);
  request.set_dst_region(dst_name);
  request.set_length(v.size);
  request.set_slice_size(v.slice);
  request.set_wait(true);
  std::vector<double> seconds;
  uint64_t src_sum = 0, dst_sum = 0, slice = 0;
  for (int i = 0; i < std::max(v.writes, 1); ++i) {
    integration::FillPattern((*src_map)->data(), v.size, v.seed + i);
    src_sum = Checksum((*src_map)->data(), v.size);
    const auto begin = Clock::now();
    absl::StatusOr<v1::Transfer> done = src_client.Write(request);
    seconds.push_back(std::chrono::duration<double>(Clock::now() - begin).count());
    if (!done.ok()) return done.status();
    if (absl::Status s = client::TransferOutcome(*done); !s.ok()) return s;
    slice = done->slice_size();
    dst_sum = Checksum((*dst_map)->data(), v.size);
    if (dst_sum != src_sum) break;
  }
  std::vector<double> later(seconds.begin() + (seconds.size() > 1 ? 1 : 0), seconds.end());
  std::sort(later.begin(), later.end());
  const std::string all = absl::StrJoin(
      seconds, ", ", [](std::string* out, double s) { absl::StrAppendFormat(out, "%.4f", s); });
  std::printf(
      "{\"mode\": \"verify\", \"bytes\": %llu, \"slice\": %llu, \"seconds\": %.4f, "
      "\"write_seconds\": [%s], \"src_checksum\": \"%016llx\", \"dst_checksum\": \"%016llx\", "
      "\"dst_checksum_before\": \"%016llx\", \"match\": %s}\n",
      static_cast<unsigned long long>(v.size), static_cast<unsigned long long>(slice),
      later[(later.size() - 1) / 2], all.c_str(), static_cast<unsigned long long>(src_sum),
      static_cast<unsigned long long>(dst_sum), static_cast<unsigned long long>(before),
      src_sum == dst_sum ? "true" : "false");
  src_map->reset();
  dst_map->reset();
  if (absl::Status s = src_client.DeregisterRegion(src_name).status(); !s.ok()) return s;
  return (*dst_client)->DeregisterRegion(dst_name).status();
}

struct BlocksArgs {
  std::string peer_target, peer;
  uint64_t block = 4096;
  uint64_t count = 4096;
  uint64_t requests = 8;
  bool read = false;
  bool no_wait = false;  // submission cost only: reply once queued
};

// count blocks: local block i <-> peer block perm[i], one request.
v1::Blocks Permuted(uint64_t count, uint64_t block, uint64_t seed) {
  std::vector<uint64_t> perm(count);
  for (uint64_t i = 0; i < count; ++i) perm[i] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::string src(count * 8, '\0'), dst(count * 8, '\0');
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t s = i * block, d = perm[i] * block;
    std::memcpy(src.data() + i * 8, &s, 8);  // x86-64: little-endian already
    std::memcpy(dst.data() + i * 8, &d, 8);
  }
  v1::Blocks blocks;
  blocks.mutable_list()->set_src_offsets(std::move(src));
  blocks.mutable_list()->set_dst_offsets(std::move(dst));
  blocks.mutable_list()->set_block_length(block);
  return blocks;
}

absl::Status RunBlocks(client::Client& local, const BlocksArgs& b) {
  absl::StatusOr<std::unique_ptr<client::Client>> remote =
      client::Client::Connect(b.peer_target, kConnectTimeout);
  if (!remote.ok()) return remote.status();
  const uint64_t size = b.block * b.count;
  for (auto [c, name, remote_access] : {std::tuple{&local, "bench_blocks_local", false},
                                        std::tuple{remote->get(), "bench_blocks_peer", true}}) {
    v1::RegisterRegionRequest r;
    r.set_name(name);
    r.set_size(size);
    r.set_backing(v1::REGION_BACKING_ANONYMOUS);
    r.mutable_access()->set_remote_write(remote_access);
    r.mutable_access()->set_remote_read(remote_access);
    if (absl::Status s = c->RegisterRegion(r).status(); !s.ok()) return s;
  }
  double submit_s = 0;
  const auto begin = Clock::now();
  for (uint64_t k = 0; k < b.requests; ++k) {
    v1::Blocks blocks = Permuted(b.count, b.block, k + 1);
    const auto start = Clock::now();
    absl::StatusOr<v1::Transfer> done;
    if (b.read) {
      v1::ReadRequest r;
      r.set_peer(b.peer);
      r.set_src_region("bench_blocks_peer");
      r.set_dst_region("bench_blocks_local");
      r.set_wait(!b.no_wait);
      // The list names src (peer) -> dst (local): swap the arrays.
      v1::BlockList* l = blocks.mutable_list();
      std::string src = l->src_offsets();
      l->set_src_offsets(l->dst_offsets());
      l->set_dst_offsets(std::move(src));
      *r.mutable_blocks() = std::move(blocks);
      done = local.ReadBlocks(r);
    } else {
      v1::WriteRequest w;
      w.set_src_region("bench_blocks_local");
      w.set_peer(b.peer);
      w.set_dst_region("bench_blocks_peer");
      w.set_wait(!b.no_wait);
      *w.mutable_blocks() = std::move(blocks);
      done = local.WriteBlocks(w);
    }
    submit_s += std::chrono::duration<double>(Clock::now() - start).count();
    if (!done.ok()) return done.status();
    if (!b.no_wait) {
      if (absl::Status s = client::TransferOutcome(*done); !s.ok()) return s;
    } else if (absl::Status s = local.WaitTransfer(done->id()).status(); !s.ok()) {
      return s;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  const double blocks = static_cast<double>(b.count * b.requests);
  std::printf(
      "{\"mode\": \"blocks\", \"direction\": \"%s\", \"block\": %llu, \"count\": %llu, "
      "\"requests\": %llu, \"seconds\": %.4f, \"blocks_per_s\": %.1f, \"gbps\": %.4f, "
      "\"submit_ms\": %.3f}\n",
      b.read ? "read" : "write", static_cast<unsigned long long>(b.block),
      static_cast<unsigned long long>(b.count), static_cast<unsigned long long>(b.requests),
      seconds, blocks / seconds, blocks * static_cast<double>(b.block) / seconds / 1e9,
      submit_s * 1000 / static_cast<double>(b.requests));
  if (absl::Status s = local.DeregisterRegion("bench_blocks_local").status(); !s.ok()) return s;
  return (*remote)->DeregisterRegion("bench_blocks_peer").status();
}

CLI::App* AddBlocks(CLI::App& app, BlocksArgs* b) {
  CLI::App* sub = app.add_subcommand("blocks", "many-block requests in random order");
  sub->add_option("--peer-target", b->peer_target)->required();
  sub->add_option("--peer", b->peer)->required();
  sub->add_option("--block", b->block, "bytes per block");
  sub->add_option("--count", b->count, "blocks per request");
  sub->add_option("--requests", b->requests, "requests, one after the other");
  sub->add_flag("--read", b->read, "read the blocks from the peer instead of writing them");
  sub->add_flag("--no-wait", b->no_wait, "time the submission alone (then wait)");
  return sub;
}

int Main(int argc, char** argv) {
  CLI::App app{"bench_client: C++ client figures for tests/bench (one JSON line per run)"};
  app.require_subcommand(1);
  std::string target;
  app.add_option("--target", target, "daemon: unix:/path or host:port")->required();
  LoopOptions loop;
  WriteArgs w;
  VerifyArgs v;
  auto add_loop = [&loop](CLI::App* sub) {
    sub->add_option("--seconds", loop.seconds, "run this long");
    sub->add_option("--max-ops", loop.max_ops, "stop after this many operations");
  };
  CLI::App* rpc = app.add_subcommand("rpc", "GetNodeInfo round trips");
  add_loop(rpc);
  CLI::App* write = app.add_subcommand("write", "Write(wait) round trips");
  add_loop(write);
  write->add_option("--threads", loop.threads, "writes in flight (one per thread)");
  write->add_option("--src", w.src)->required();
  write->add_option("--peer", w.peer)->required();
  write->add_option("--dst", w.dst)->required();
  write->add_option("--length", w.length);
  write->add_option("--slice", w.slice);
  CLI::App* verify = app.add_subcommand("verify", "one SHM-to-SHM write, checksummed");
  verify->add_option("--peer-target", v.peer_target)->required();
  verify->add_option("--peer", v.peer)->required();
  verify->add_option("--size", v.size);
  verify->add_option("--slice", v.slice);
  verify->add_option("--seed", v.seed);
  verify->add_option("--writes", v.writes, "write the regions this many times (>= 1)")
      ->check(CLI::PositiveNumber);
  BlocksArgs b;
  CLI::App* blocks = AddBlocks(app, &b);
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<std::unique_ptr<client::Client>> client =
      client::Client::Connect(target, kConnectTimeout);
  absl::Status status = client.status();
  if (status.ok() && rpc->parsed()) status = RunRpc(**client, loop);
  if (status.ok() && write->parsed()) status = RunWrites(**client, loop, w);
  if (status.ok() && verify->parsed()) status = RunVerify(**client, v);
  if (status.ok() && blocks->parsed()) status = RunBlocks(**client, b);
  std::fflush(stdout);
  if (!status.ok()) {
    std::fprintf(stderr, "bench_client: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace xferd::bench

int main(int argc, char** argv) { return xferd::bench::Main(argc, argv); }
