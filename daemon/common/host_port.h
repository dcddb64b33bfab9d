// "host:port" addresses as the daemon's configuration and peers write them:
// parsed once here for the TCP transport, the metrics endpoint and main, and
// printed back with IPv6 hosts in brackets. No name resolution happens here.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xferd {

struct HostPort {
  std::string host;  // name, IPv4 or IPv6 (without brackets); empty: any address
  uint16_t port = 0;
};

// "127.0.0.1:7300", "[::1]:0", "localhost:7300", ":7300". Pure; any thread.
// INVALID_ARGUMENT naming the address and the form it should have.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

// The inverse of ParseHostPort: "[::1]:7300" for an IPv6 host, "host:7300"
// otherwise. Pure; any thread.
std::string FormatHostPort(const HostPort& address);

}  // namespace xferd
