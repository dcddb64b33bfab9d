#include "daemon/service/page_token.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace xferd::service {
namespace {

constexpr absl::string_view kVersion = "xferd-page-1:";

}  // namespace

uint32_t PageSize(uint32_t requested) {
  return requested == 0 ? kMaxPageSize : std::min(requested, kMaxPageSize);
}

std::string PageToken(absl::string_view list, absl::string_view last_key) {
  return absl::WebSafeBase64Escape(absl::StrCat(kVersion, list, ":", last_key));
}

absl::StatusOr<std::string> PageStart(absl::string_view list, absl::string_view token) {
  if (token.empty()) return std::string();
  std::string decoded;
  const std::string prefix = absl::StrCat(kVersion, list, ":");
  if (!absl::WebSafeBase64Unescape(token, &decoded) || !absl::StartsWith(decoded, prefix) ||
      decoded.size() == prefix.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token is not a token of this list: pass the previous response's next_page_token "
        "unchanged (or none for the first page)"));
  }
  return decoded.substr(prefix.size());
}

}  // namespace xferd::service
