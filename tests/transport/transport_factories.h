// The transports the conformance suite runs over: TCP (plain and with TLS
// lanes), verbs and the engine tests' fake. A factory returns an error when its transport cannot
// run on this machine; the suite then skips it.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/tcp/tcp_tls.h"
#include "daemon/transport/transport.h"

namespace xferd::transport {

struct TransportFactory {
  std::string name;
  // `node_id`: the daemon the transport stands for (TLS lanes present a
  // certificate naming it).
  std::function<absl::StatusOr<std::unique_ptr<Transport>>(
      const memory::RegionRegistry&, uint32_t pollers, const std::string& node_id)>
      create;
  // A refused inbound write fails alone and the lane carries on (TCP NACK);
  // otherwise the refusal breaks the lane (an RDMA remote access error).
  bool refuses_per_write = true;
  // The receiver checks the region ACL on every write (TCP); otherwise only
  // when handing out keys.
  bool enforces_acl_per_write = true;
  // Verified ops (DataOp::checksums) are checked by the transport, in its
  // frames (TCP); otherwise the engine checks at the peer once the
  // transfer's ops completed (verbs; docs/integrity.md).
  bool verifies = false;
};

std::vector<TransportFactory> AllTransportFactories();

// TLS files of a daemon certificate for `node_id` (DNS SAN, as the daemon's
// must be), issued by one test CA made for the process (in TEST_TMPDIR).
absl::StatusOr<tcp::LaneTlsFiles> TestLaneTlsFiles(const std::string& node_id);

// Runs `pump_once` (one pass over the workers a test drives) until `done`;
// false if `timeout` passes first.
bool PumpUntil(const std::function<bool()>& done, const std::function<void()>& pump_once,
               absl::Duration timeout);

// What `owner` grants the peer of `link` for `region`, as ResolveRegion
// hands it out. Verbs binds the keys on the owner's pollers, which the
// tests drive themselves: `pump_once` (one pass over their workers) runs on
// this thread while another waits for the grant.
absl::StatusOr<RemoteRegion> GrantPumping(Transport& owner, Link& link,
                                          const memory::Region& region,
                                          const std::function<void()>& pump_once,
                                          absl::Duration timeout);

// A write op of one block from `src` to `dst` (the block must outlive it).
DataOp OneBlockWrite(uint64_t cookie, const memory::Region& src, const RemoteRegion& dst,
                     const Block* block);

// gtest prints a parameter by its name.
inline void PrintTo(const TransportFactory& factory, std::ostream* out) { *out << factory.name; }

}  // namespace xferd::transport
