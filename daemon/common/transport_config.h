// [transport]: which data plane the daemon runs (TCP or verbs) and how:
// listen addresses, socket buffers and timeouts, TLS on the data lanes, the
// RDMA devices and how they pair with a peer's. The largest of config.h's
// tables, in a header of its own; config.h includes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace xferd {

enum class TransportChoice { kAuto, kTcp, kVerbs };

struct TransportConfig {
  TransportChoice kind = TransportChoice::kAuto;
  // Fail at start-up instead of falling back to TCP when no RDMA device works.
  bool require_rdma = false;
  // TCP transport: data-plane listen address (port 0 = any free port).
  std::string tcp_data_listen = "127.0.0.1:0";
  // TCP transport: the host peers should connect data lanes to; default: the
  // host of tcp_data_listen.
  std::string tcp_advertise_host;
  // TCP transport: kernel socket buffer sizes. 0 (the default) leaves them
  // to the kernel's autotuning, which a fixed size turns off: on loopback a
  // fixed 4 MiB cost 30% more CPU per GiB (data copied into the socket goes
  // cold before the receiver copies it out). Set it for long fat paths whose
  // bandwidth-delay product exceeds net.ipv4.tcp_rmem's maximum.
  uint64_t tcp_socket_buffer = 0;
  // TCP transport: data a peer leaves unacknowledged this long breaks the
  // lane (TCP_USER_TIMEOUT): how long a partition may last before transfers
  // on it fail and the next write reconnects.
  absl::Duration tcp_user_timeout = absl::Seconds(10);
  // TCP transport: "tls" (TLS 1.3 on every data lane, with the [tls]
  // certificates) or "off"; empty: "tls" when [tls] is configured, else
  // "off". See TcpEncrypted().
  std::string tcp_encryption;
  // TCP transport, encrypted lanes: how much of TLS the kernel may do.
  // "auto": both directions where the kernel has the "tls" module (OpenSSL
  // sends, the daemon installs receive), else user space; "send": OpenSSL's
  // send offload only; "off": OpenSSL does every record.
  std::string tcp_kernel_tls = "auto";
  // Verbs transport choices; empty/0 means "pick automatically".
  std::string verbs_device;
  uint32_t verbs_port = 0;
  int32_t verbs_gid_index = -1;
  uint32_t verbs_mtu = 0;
  // Several devices at once: their names, or {"all"} for every device with
  // an ACTIVE port. Empty: the one device of verbs_device (or the first
  // usable one). verbs_port, verbs_gid_index and verbs_mtu apply to each.
  std::vector<std::string> verbs_devices;
  // How local devices pair with a peer's: "index" (the i-th with the i-th;
  // the larger side's extra devices stay idle towards that peer) or "rail"
  // (devices whose GIDs share a prefix: the same subnet).
  std::string verbs_pairing = "index";
  // Pin each poller to the CPUs of its home device's NUMA node (poller i:
  // device i % devices), where sysfs names the node: "auto" or "off".
  std::string numa_pinning = "auto";
  // Rail pairing: GID bits that must match; 0 = 120 (a /24) for IPv4-mapped
  // RoCE GIDs, 64 (the subnet prefix) otherwise.
  uint32_t verbs_rail_prefix_bits = 0;
  // RC retransmission: timeout exponent (4.096 us * 2^t) and retry count.
  // 14 and 3 let a dead peer surface in well under 2 s.
  uint32_t verbs_qp_timeout = 14;
  uint32_t verbs_retry_count = 3;
  // Regions larger than this are registered as several MRs, in parallel
  // (at least 16MiB, the largest slice).
  uint64_t verbs_mr_chunk = 1ull << 30;
  // Peers get region keys that work only on their own link's queue pairs
  // (type-2 memory windows). false: the MRs' own keys, which every queue
  // pair of the daemon's protection domain accepts; only for devices
  // without type-2B memory windows.
  bool verbs_memory_windows = true;
};

}  // namespace xferd
