// Fuzzes the daemon's TOML configuration: ParseConfig on arbitrary text, then
// Validate on whatever parses. Errors must be statuses (INVALID_ARGUMENT
// naming the key), never a crash or an escaped exception. Debian's toml++
// parser is a shared library without coverage instrumentation, so the
// fuzzer is guided by our own code: the table readers and the validation.
#include <cstdint>

#include "absl/strings/string_view.h"
#include "daemon/common/config.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<xferd::Config> config = xferd::ParseConfig(text, "<fuzz>");
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  const absl::Status valid = xferd::Validate(*config);
  FUZZ_CHECK(valid.ok() || valid.code() == absl::StatusCode::kInvalidArgument);
  return 0;
}
