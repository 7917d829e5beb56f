#pragma once
/// \file
/// SERVEKIT_ASSERT: precondition checks that a user may override or disable.
///
/// Define SERVEKIT_ASSERT before including any servekit header to route failures elsewhere,
/// or define SERVEKIT_DISABLE_ASSERT to compile the checks out.

#include <cstdio>
#include <cstdlib>

#ifndef SERVEKIT_ASSERT
#ifdef SERVEKIT_DISABLE_ASSERT
#define SERVEKIT_ASSERT(condition, message) static_cast<void>(0)
#else
#define SERVEKIT_ASSERT(condition, message)                                                        \
  ((condition) ? static_cast<void>(0)                                                              \
               : ::servekit::detail::assertion_failed(#condition, message, __FILE__, __LINE__))
#endif
#endif

namespace servekit::detail {

/// Prints the failed precondition and aborts: a broken precondition is a bug in the caller.
[[noreturn]] inline void assertion_failed(const char* condition, const char* message,
                                          const char* file, int line) noexcept {
  std::fprintf(stderr, "servekit: assertion '%s' failed at %s:%d: %s\n", condition, file, line,
               message);
  std::abort();
}

} // namespace servekit::detail
