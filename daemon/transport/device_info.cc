#include "daemon/transport/device_info.h"

#include <arpa/inet.h>

#include <algorithm>
#include <iterator>

namespace xferd::transport {

std::string GidEntry::ToString() const {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, raw.data(), text, sizeof(text));
  return text;
}

bool GidEntry::ipv4_mapped() const {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::equal(std::begin(kPrefix), std::end(kPrefix), raw.begin());
}

const char* PortStateName(PortState state) {
  switch (state) {
    case PortState::kDown:
      return "DOWN";
    case PortState::kInit:
      return "INIT";
    case PortState::kArmed:
      return "ARMED";
    case PortState::kActive:
      return "ACTIVE";
    case PortState::kActiveDefer:
      return "ACTIVE_DEFER";
    case PortState::kUnknown:
      break;
  }
  return "UNKNOWN";
}

const char* GidTypeName(GidType type) {
  switch (type) {
    case GidType::kIb:
      return "IB";
    case GidType::kRoceV1:
      return "RoCE v1";
    case GidType::kRoceV2:
      return "RoCE v2";
  }
  return "?";
}

}  // namespace xferd::transport
