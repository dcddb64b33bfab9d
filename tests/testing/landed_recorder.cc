#include "tests/testing/landed_recorder.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "daemon/base/endian.h"

namespace xferd::testing {

LandedRecorder::LandedRecorder(memory::Region& region) : hub_(region.landed()) {
  if (!hub_.Subscribe(this, &cursor_)) std::abort();
}

LandedRecorder::~LandedRecorder() { hub_.Unsubscribe(this); }

std::vector<memory::LandedEvent> LandedRecorder::Take() {
  std::vector<memory::LandedEvent> events;
  memory::LandedEvent event;
  uint64_t dropped = 0;
  while (hub_.Read(&cursor_, &event, &dropped) == memory::LandedEventHub::ReadResult::kEvent) {
    EXPECT_EQ(dropped, 0u) << "events were dropped before the test read them";
    events.push_back(event);
  }
  return events;
}

Ranges UnpackRanges(const memory::LandedRanges& r) {
  Ranges out;
  const auto* o = reinterpret_cast<const uint8_t*>(r.offsets.data());
  const auto* l = reinterpret_cast<const uint8_t*>(r.lengths.data());
  for (size_t i = 0; 8 * i < r.offsets.size(); ++i) {
    out.emplace_back(LoadLE<uint64_t>(o + 8 * i), LoadLE<uint64_t>(l + 8 * i));
  }
  return out;
}

}  // namespace xferd::testing
