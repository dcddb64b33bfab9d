// Which local RDMA device talks to which of a peer's: by position ("index")
// or by network ("rail": GIDs with a common prefix, for rail-optimized
// fabrics where NIC i of every host sits on switch i). Pure logic on the
// handshake's device lists, so it is unit-tested without a device.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xferd::transport::verbs {

enum class Pairing { kIndex, kRail };

// One side's device as the pairing sees it.
struct PairingDevice {
  std::string name;
  std::array<uint8_t, 16> gid{};
};

struct DevicePair {
  uint32_t local = 0;   // index into the local list
  uint32_t remote = 0;  // index into the remote list
};

// Each device pairs at most once. kIndex: local i with remote i, for i below
// the smaller count. kRail: each local device, in order, with the first
// unpaired remote device whose GID shares `prefix_bits` leading bits (0 =
// 120 for IPv4-mapped GIDs, a /24, else 64, the subnet prefix).
// FAILED_PRECONDITION when no pair results, naming both sides' devices.
absl::StatusOr<std::vector<DevicePair>> PairDevices(const std::vector<PairingDevice>& local,
                                                    const std::vector<PairingDevice>& remote,
                                                    Pairing pairing, uint32_t prefix_bits);

absl::StatusOr<Pairing> ParsePairing(const std::string& text);

}  // namespace xferd::transport::verbs
