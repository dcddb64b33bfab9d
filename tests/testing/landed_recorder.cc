#include "tests/testing/landed_recorder.h"

#include <gtest/gtest.h>

#include <cstdlib>

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

}  // namespace xferd::testing
