// A local client for ring_integration_test to kill mid-transfer: opens the
// rings of the daemon at argv[1] ("unix:/path"), submits one write of
// argv[2] bytes from region "src" to "dst" on node-b in 4 KiB slices, and
// waits for it; with argv[3] "detached", submits it detached and exits once
// the daemon says it is queued. Prints "submitted" once the write is in the
// ring.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "client/cpp/local_rings.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) return 2;
  const bool detached = argc == 4 && std::string(argv[3]) == "detached";
  const std::string target = argv[1];
  auto rings = xferd::client::LocalRings::Open(target.substr(5) + ".local", {});
  if (!rings.ok()) {
    std::fprintf(stderr, "%s\n", rings.status().ToString().c_str());
    return 1;
  }
  xferd::client::RingRequest write;
  write.peer = "node-b";
  write.src = "src";
  write.dst = "dst";
  write.length = std::strtoull(argv[2], nullptr, 10);
  write.slice_kib = 4;
  write.detached = detached;
  write.queued_notice = detached;
  auto submitted = (*rings)->Submit(write);
  if (!submitted.ok()) return 1;
  std::printf("submitted\n");
  std::fflush(stdout);
  auto done = (*rings)->Wait(*submitted, /*until_queued=*/detached, absl::InfiniteFuture());
  return done.ok() ? 0 : 1;
}
