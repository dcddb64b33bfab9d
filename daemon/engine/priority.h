// The priority classes of transfers (docs/priorities.md): what a request
// asks for, and how each class is served where bytes wait. Critical goes
// before everything; normal, bulk and background share what critical
// leaves by weight (PriorityConfig), none starving.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace xferd::engine {

// In order of precedence. The wire values (gRPC Priority, a ring entry's
// priority byte) are these plus one; 0 there means kNormal.
enum class Priority : uint8_t { kCritical = 0, kNormal = 1, kBulk = 2, kBackground = 3 };
inline constexpr size_t kPriorities = 4;
inline constexpr std::array<Priority, kPriorities> kAllPriorities = {
    Priority::kCritical, Priority::kNormal, Priority::kBulk, Priority::kBackground};

inline size_t PriorityIndex(Priority p) { return static_cast<size_t>(p); }
// "critical", "normal", "bulk", "background".
const char* PriorityName(Priority p);

// Wire value (0: unspecified, 1..4 the classes) to a class; false if it
// names none.
bool PriorityFromWire(uint32_t wire, Priority* out);
inline uint32_t PriorityToWire(Priority p) { return static_cast<uint32_t>(p) + 1; }

}  // namespace xferd::engine
