#include "tests/transport/transport_factories.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include "daemon/transport/tcp/tcp_transport.h"
#include "daemon/transport/verbs/verbs_transport.h"
#include "tests/testing/fake_transport.h"
#include "tests/testing/test_certs.h"

namespace xferd::transport {

absl::StatusOr<tcp::LaneTlsFiles> TestLaneTlsFiles(const std::string& node_id) {
  static auto* const ca = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    return new absl::StatusOr<testing::TestCa>(
        testing::TestCa::Create(tmp != nullptr ? tmp : "/tmp", "lane-ca"));
  }();
  if (!ca->ok()) return ca->status();
  absl::StatusOr<testing::TestCert> cert = (*ca)->IssueForDaemon(node_id);
  if (!cert.ok()) return cert.status();
  return tcp::LaneTlsFiles{testing::ReadTestFile(cert->cert), testing::ReadTestFile(cert->key),
                           testing::ReadTestFile((*ca)->cert())};
}

bool PumpUntil(const std::function<bool()>& done, const std::function<void()>& pump_once,
               absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    pump_once();
  }
  return true;
}

absl::StatusOr<RemoteRegion> GrantPumping(Transport& owner, Link& link,
                                          const memory::Region& region,
                                          const std::function<void()>& pump_once,
                                          absl::Duration timeout) {
  absl::StatusOr<RemoteRegion> key = absl::UnknownError("not granted");
  std::atomic<bool> done{false};
  std::thread grant([&] {
    key = owner.GrantRegion(link, region, absl::Now() + timeout);
    done = true;
  });
  while (!done.load()) pump_once();
  grant.join();
  return key;
}

DataOp OneBlockWrite(uint64_t cookie, const memory::Region& src, const RemoteRegion& dst,
                     const Block* block) {
  DataOp op;
  op.cookie = cookie;
  op.kind = OpKind::kWrite;
  op.local_base = src.data();
  op.local_registration = src.registration();
  op.remote = &dst;
  op.blocks = block;
  op.block_count = 1;
  op.length = block->length;
  return op;
}

namespace {

// TCP lanes, plain or over TLS 1.3 (each side with a certificate naming
// it). `predates_sums_frames`: the node that stands for a daemon older than
// SUMS frames, which neither reads nor sends them (empty: none).
TransportFactory TcpFactory(std::string name, bool tls, std::string predates_sums_frames = "") {
  return TransportFactory{
      std::move(name),
      [tls, predates_sums_frames](
          const memory::RegionRegistry& regions, uint32_t pollers,
          const std::string& node_id) -> absl::StatusOr<std::unique_ptr<Transport>> {
        tcp::TcpTransportOptions options;
        options.pollers = pollers;
        options.lane_depth = 16;
        options.sums_frames = node_id != predates_sums_frames;
        if (tls) {
          absl::StatusOr<tcp::LaneTlsFiles> files = TestLaneTlsFiles(node_id);
          if (!files.ok()) return files.status();
          options.tls = *std::move(files);
        }
        auto transport = tcp::TcpTransport::Create(options, regions);
        if (!transport.ok()) return transport.status();
        return std::unique_ptr<Transport>(*std::move(transport));
      },
      /*refuses_per_write=*/true, /*enforces_acl_per_write=*/true, /*verifies=*/true};
}

}  // namespace

std::vector<TransportFactory> AllTransportFactories() {
  std::vector<TransportFactory> factories;
  factories.push_back(TcpFactory("tcp", /*tls=*/false));
  factories.push_back(TcpFactory("tcp_tls", /*tls=*/true));
  // Daemons of two versions on one link: "a" predates SUMS frames, so b's
  // answers to a's verified reads carry their tables inline, and a's
  // refuse a SUMS frame as a protocol error, as a daemon of that version did.
  factories.push_back(TcpFactory("tcp_a_predates_sums_frames", /*tls=*/false, "a"));
  // Real verbs on whatever device this machine has (Soft-RoCE in the VM
  // suite); skipped where there is none.
  factories.push_back(
      TransportFactory{"verbs",
                       [](const memory::RegionRegistry& regions, uint32_t pollers,
                          const std::string&) -> absl::StatusOr<std::unique_ptr<Transport>> {
                         auto devices = verbs::QueryDevices();
                         if (!devices.ok()) return devices.status();
                         auto port = verbs::SelectPort(*devices, verbs::DeviceRequest{});
                         if (!port.ok()) return port.status();
                         verbs::VerbsTransportOptions options;
                         options.pollers = pollers;
                         options.lane_depth = 16;
                         // Small MR chunks so slices cross chunk boundaries in these tests.
                         options.mr_chunk = verbs::kMinMrChunk;
                         // Two RDMA READs in flight per queue pair, far fewer than the
                         // blocks the read tests keep in flight: the bound must bite.
                         options.max_rd_atomic = 2;
                         auto transport = verbs::VerbsTransport::Create(options, *port, regions);
                         if (!transport.ok()) return transport.status();
                         return std::unique_ptr<Transport>(*std::move(transport));
                       },
                       /*refuses_per_write=*/false, /*enforces_acl_per_write=*/false});
  // The engine tests' stand-in, held to the same contract. Its transports pair
  // through one fabric for the whole process, as TCP's through loopback.
  factories.push_back(TransportFactory{
      "fake",
      [](const memory::RegionRegistry& regions, uint32_t pollers,
         const std::string&) -> absl::StatusOr<std::unique_ptr<Transport>> {
        static auto* const fabric = new testing::FakeFabric();
        return std::make_unique<testing::FakeTransport>(*fabric, regions, pollers, 16);
      },
      /*refuses_per_write=*/true, /*enforces_acl_per_write=*/true});
  return factories;
}

}  // namespace xferd::transport
