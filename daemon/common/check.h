// Invariant checks. A failed CHECK means a bug in xferd, not bad input or a
// network fault: it logs at critical level and aborts so the bug is loud.
// Faults caused by peers, clients or the environment return absl::Status.
#pragma once

#include <spdlog/spdlog.h>

#include <cstdlib>

#define XFERD_CHECK(cond)                                                         \
  do {                                                                            \
    if (__builtin_expect(!(cond), 0)) {                                           \
      ::spdlog::critical("CHECK failed at {}:{}: {}", __FILE__, __LINE__, #cond); \
      ::spdlog::shutdown();                                                       \
      std::abort();                                                               \
    }                                                                             \
  } while (0)

#ifdef NDEBUG
#define XFERD_DCHECK(cond) \
  do {                     \
  } while (false && (cond))
#else
#define XFERD_DCHECK(cond) XFERD_CHECK(cond)
#endif
