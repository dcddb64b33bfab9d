#include "daemon/transport/verbs/device_pairing.h"

#include <arpa/inet.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace xferd::transport::verbs {
namespace {

bool Ipv4Mapped(const std::array<uint8_t, 16>& gid) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::equal(std::begin(kPrefix), std::end(kPrefix), gid.begin());
}

bool SamePrefix(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b,
                uint32_t bits) {
  for (uint32_t i = 0; i < 16 && bits > 0; ++i) {
    const uint32_t take = std::min<uint32_t>(bits, 8);
    const uint8_t mask = static_cast<uint8_t>(0xff00 >> take);
    if ((a[i] & mask) != (b[i] & mask)) return false;
    bits -= take;
  }
  return true;
}

std::string Describe(const std::vector<PairingDevice>& devices) {
  std::vector<std::string> parts;
  for (const PairingDevice& d : devices) {
    char text[INET6_ADDRSTRLEN] = {};
    inet_ntop(AF_INET6, d.gid.data(), text, sizeof(text));
    parts.push_back(absl::StrCat(d.name, " (", text, ")"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

absl::StatusOr<std::vector<DevicePair>> PairDevices(const std::vector<PairingDevice>& local,
                                                    const std::vector<PairingDevice>& remote,
                                                    Pairing pairing, uint32_t prefix_bits) {
  std::vector<DevicePair> pairs;
  if (pairing == Pairing::kIndex) {
    const size_t n = std::min(local.size(), remote.size());
    for (size_t i = 0; i < n; ++i) {
      pairs.push_back(DevicePair{static_cast<uint32_t>(i), static_cast<uint32_t>(i)});
    }
  } else {
    std::vector<bool> taken(remote.size(), false);
    for (size_t i = 0; i < local.size(); ++i) {
      const uint32_t bits =
          prefix_bits != 0 ? prefix_bits : (Ipv4Mapped(local[i].gid) ? 120 : 64);
      for (size_t j = 0; j < remote.size(); ++j) {
        if (taken[j] || !SamePrefix(local[i].gid, remote[j].gid, bits)) continue;
        taken[j] = true;
        pairs.push_back(DevicePair{static_cast<uint32_t>(i), static_cast<uint32_t>(j)});
        break;
      }
    }
  }
  if (pairs.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no device pairs with the peer's (", pairing == Pairing::kRail ? "rail" : "index",
        " pairing): local ", Describe(local), "; peer ", Describe(remote),
        pairing == Pairing::kRail
            ? "; rail pairing needs GIDs on common subnets (transport.verbs_rail_prefix_bits), "
              "or use transport.verbs_pairing = \"index\""
            : ""));
  }
  return pairs;
}

absl::StatusOr<Pairing> ParsePairing(const std::string& text) {
  if (text == "index") return Pairing::kIndex;
  if (text == "rail") return Pairing::kRail;
  return absl::InvalidArgumentError(
      absl::StrCat("transport.verbs_pairing must be \"index\" or \"rail\", not \"", text, "\""));
}

}  // namespace xferd::transport::verbs
