// Paging of the List* calls (AIP-158): the page size a request gets, and
// opaque page tokens that carry where the next page starts (the last item's
// sort key) and which list they belong to.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xferd::service {

// Items per page at most: a page of the largest items (transfers with long
// error messages) stays far below a stock gRPC client's 4 MiB limit.
inline constexpr uint32_t kMaxPageSize = 1000;

// `requested` 0 means the default (kMaxPageSize); larger is capped.
uint32_t PageSize(uint32_t requested);

// A token for the page after `last_key` of list `list` ("regions", ...).
std::string PageToken(absl::string_view list, absl::string_view last_key);

// The last key a token of list `list` carries; "" for an empty token (the
// first page). INVALID_ARGUMENT for a token this daemon did not issue for
// that list.
absl::StatusOr<std::string> PageStart(absl::string_view list, absl::string_view token);

}  // namespace xferd::service
