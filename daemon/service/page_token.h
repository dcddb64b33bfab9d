// Paging of the List* calls (AIP-158): the page size a request gets, and
// opaque page tokens that carry where the next page starts (the last item's
// sort key) and which list they belong to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xferd::service {

// Items per page at most.
inline constexpr uint32_t kMaxPageSize = 1000;
// Bytes of items per page at most (a page always has one item, however
// large): with regions of long ACLs or transfers of long messages a page
// still stays far below a stock gRPC client's 4 MiB limit.
inline constexpr size_t kMaxPageBytes = 1 << 20;

// `requested` 0 means the default (kMaxPageSize); larger is capped.
uint32_t PageSize(uint32_t requested);

// Fills one page: Take(bytes) says whether an item of `bytes` (its encoded
// size) still goes on it, within `max_items` and `max_bytes`; the first
// item always does. Once it says no, the page is full.
class PageFill {
 public:
  explicit PageFill(uint32_t max_items, size_t max_bytes = kMaxPageBytes)
      : max_items_(max_items), max_bytes_(max_bytes) {}
  bool Take(size_t bytes) {
    if (items_ >= max_items_ || (items_ > 0 && bytes_ + bytes > max_bytes_)) return false;
    ++items_;
    bytes_ += bytes;
    return true;
  }
  uint32_t items() const { return items_; }

 private:
  const uint32_t max_items_;
  const size_t max_bytes_;
  uint32_t items_ = 0;
  size_t bytes_ = 0;
};

// A token for the page after `last_key` of list `list` ("regions", ...).
std::string PageToken(absl::string_view list, absl::string_view last_key);

// The last key a token of list `list` carries; "" for an empty token (the
// first page). INVALID_ARGUMENT for a token this daemon did not issue for
// that list.
absl::StatusOr<std::string> PageStart(absl::string_view list, absl::string_view token);

}  // namespace xferd::service
