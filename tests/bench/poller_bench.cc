// What the pollers spend per transfer: two engines in this process over real
// TCP lanes on loopback, one poller each, writing small transfers `depth` at
// a time. Prints the rate and each side's poller CPU time per transfer (from
// the threads' schedstat), so a change to the data path can be measured
// before and after on the same host. The destination is checked afterwards.
#include <dirent.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "tests/transport/transport_factories.h"
#include "tests/unit/engine/engine_harness.h"

namespace {

using xferd::testing::EngineHarness;
using xferd::testing::Node;

// Threads of this process named like pollers.
std::set<int> PollerThreadsNow() {
  std::set<int> tids;
  DIR* dir = opendir("/proc/self/task");
  while (dirent* entry = dir != nullptr ? readdir(dir) : nullptr) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + entry->d_name + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("xferd-poll-", 0) == 0) tids.insert(std::atoi(entry->d_name));
  }
  if (dir != nullptr) closedir(dir);
  return tids;
}

// Once `count` are there: a poller names itself once it runs.
std::set<int> PollerThreads(size_t count) {
  std::set<int> tids = PollerThreadsNow();
  for (int i = 0; i < 1000 && tids.size() < count; ++i) {
    absl::SleepFor(absl::Milliseconds(1));
    tids = PollerThreadsNow();
  }
  return tids;
}

// Nanoseconds the threads have run on a CPU.
uint64_t CpuNanos(const std::set<int>& tids) {
  uint64_t total = 0;
  for (int tid : tids) {
    std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/schedstat");
    uint64_t run = 0;
    stat >> run;
    total += run;
  }
  return total;
}

// Keeps at most `depth` transfers in flight and counts their ends.
class Window {
 public:
  explicit Window(int depth) : free_(depth) {}
  void Acquire() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(+[](int* free) { return *free > 0; }, &free_));
    --free_;
  }
  void Release(bool done) {
    absl::MutexLock lock(&mu_);
    ++free_;
    ++(done ? done_ : failed_);
  }
  void WaitAll(int depth) {
    absl::MutexLock lock(&mu_);
    struct Args {
      int* free;
      int depth;
    } args{&free_, depth};
    mu_.Await(absl::Condition(+[](Args* a) { return *a->free == a->depth; }, &args));
  }
  int done() {
    absl::MutexLock lock(&mu_);
    return done_;
  }
  int failed() {
    absl::MutexLock lock(&mu_);
    return failed_;
  }

 private:
  absl::Mutex mu_;
  int free_;
  int done_ = 0;
  int failed_ = 0;
};

// Submits `count` transfers in one call (fewer calls: the submitting
// thread must not be what limits the pollers), to slots first..first+count.
void Submit(Node& a, Window& window, uint64_t size, uint64_t first, int count, uint64_t slots) {
  std::vector<xferd::engine::TransferSpec> specs;
  for (int i = 0; i < count; ++i) {
    window.Acquire();
    const uint64_t offset = ((first + i) % slots) * size;
    specs.push_back(xferd::testing::Spec("src", "b", "dst", size, offset, offset));
  }
  a.engine->Submit(std::move(specs), false, [&window, count](auto submitted) {
    if (!submitted.ok()) {
      std::fprintf(stderr, "refused: %s\n", submitted.status().ToString().c_str());
      for (int i = 0; i < count; ++i) window.Release(false);
      return;
    }
    for (const std::shared_ptr<xferd::engine::Transfer>& t : *submitted) {
      auto end = [&window](const xferd::engine::TransferInfo& info) {
        window.Release(info.state == xferd::engine::TransferState::kDone);
      };
      if (!t->AddObserver(end)) end(t->Info());
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"poller CPU per transfer, two engines over TCP on loopback"};
  int transfers = 200000;
  int depth = 256;
  int batch = 16;
  uint64_t size = 4096;
  app.add_option("--transfers", transfers, "transfers measured");
  app.add_option("--depth", depth, "transfers in flight");
  app.add_option("--size", size, "bytes per transfer");
  app.add_option("--batch", batch, "transfers per Submit call");
  CLI11_PARSE(app, argc, argv);

  xferd::EngineConfig config;
  config.pollers = 1;
  const xferd::transport::TransportFactory* tcp = nullptr;
  static const std::vector<xferd::transport::TransportFactory> factories =
      xferd::transport::AllTransportFactories();
  for (const auto& f : factories) {
    if (f.name == "tcp") tcp = &f;
  }
  EngineHarness h(config, tcp->create);
  Node& a = h.Add("a");
  const std::set<int> a_pollers = PollerThreads(1);
  Node& b = h.Add("b");
  std::set<int> b_pollers = PollerThreads(2);
  for (int tid : a_pollers) b_pollers.erase(tid);
  const uint64_t slots = 4096;
  auto src = h.RegisterOrDie(a, "src", slots * size, false);
  auto dst = h.RegisterOrDie(b, "dst", slots * size, true);
  xferd::testing::Fill(*src, 7);
  if (!h.Connect(a, b).ok()) return 1;

  Window window(depth);
  for (uint64_t i = 0; i < slots; i += batch) Submit(a, window, size, i, batch, slots);  // warm-up
  window.WaitAll(depth);
  const uint64_t a_before = CpuNanos(a_pollers), b_before = CpuNanos(b_pollers);
  const absl::Time start = absl::Now();
  for (int i = 0; i < transfers; i += batch) Submit(a, window, size, i, batch, slots);
  window.WaitAll(depth);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double a_ns = static_cast<double>(CpuNanos(a_pollers) - a_before) / transfers;
  const double b_ns = static_cast<double>(CpuNanos(b_pollers) - b_before) / transfers;
  const bool same = std::memcmp(src->data(), dst->data(), slots * size) == 0;
  std::printf("poller_bench: %d transfers of %lu B, %d in flight, submitted %d at a time, "
              "1 poller per engine\n",
              transfers, static_cast<unsigned long>(size), depth, batch);
  std::printf("  rate                      %10.0f transfers/s\n", transfers / seconds);
  std::printf("  sender poller CPU         %10.0f ns/transfer\n", a_ns);
  std::printf("  receiver poller CPU       %10.0f ns/transfer\n", b_ns);
  std::printf("  done %d, failed %d, destination %s\n", window.done(), window.failed(),
              same ? "verified" : "DIFFERS");
  return same && window.failed() == 0 ? 0 : 1;
}
