// How the engine answers work that may finish later, on another thread: a
// callback called exactly once with the result or the error.
#pragma once

#include <functional>

#include "absl/status/statusor.h"

namespace xferd::engine {

template <typename T>
using Callback = std::function<void(absl::StatusOr<T>)>;

}  // namespace xferd::engine
