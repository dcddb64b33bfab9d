// Early-return helpers for absl::Status / absl::StatusOr on control paths.
// Debian's Abseil (20220623) does not ship public versions of these macros.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define XFERD_CONCAT_INNER(a, b) a##b
#define XFERD_CONCAT(a, b) XFERD_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                                          \
  do {                                                                 \
    ::absl::Status xferd_status_ = (expr);                             \
    if (ABSL_PREDICT_FALSE(!xferd_status_.ok())) return xferd_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` declares x from an absl::StatusOr, or
// returns its status from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr) \
  XFERD_ASSIGN_OR_RETURN_IMPL(XFERD_CONCAT(xferd_statusor_, __LINE__), lhs, expr)

#define XFERD_ASSIGN_OR_RETURN_IMPL(statusor, lhs, expr)            \
  auto statusor = (expr);                                           \
  if (ABSL_PREDICT_FALSE(!statusor.ok())) return statusor.status(); \
  lhs = std::move(statusor).value()
