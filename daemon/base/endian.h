// Explicit little-endian loads and stores for wire formats (TCP frames, the
// verbs notice record, the clients' packed block arrays), independent of the
// host's byte order.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xferd {

template <typename T>
inline void StoreLE(uint8_t* p, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<uint8_t>(value >> (8 * i));
}

template <typename T>
inline T LoadLE(const uint8_t* p) {
  T value = 0;
  for (size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(p[i]) << (8 * i);
  return value;
}

}  // namespace xferd
