#pragma once
/// \file
/// The global operator new and delete of servekit.test.http_alloc (failing_new.cpp), which
/// replace the standard ones for the whole program: every allocation is counted (live bytes and
/// their peak, for the decoder's memory test), and allocations can be made to fail (std::bad_alloc,
/// or nullptr from the nothrow forms) for fault injection. Only the threads marked subject (the
/// server's I/O thread) see failures; the test's client and the models' threads never do. With the
/// environment variable FAILING_NEW_TRACE set, each failed allocation prints its backtrace on
/// stderr.

#include <atomic>
#include <cstdint>

namespace failing_new {

/// Live bytes allocated through operator new (malloc_usable_size of each block), all threads.
extern std::atomic<std::int64_t> live;
/// The highest `live` since the test last stored into it.
extern std::atomic<std::int64_t> peak;

/// Allocations of subject threads since the last arm_*() call.
[[nodiscard]] std::uint64_t allocations() noexcept;
/// Allocations made to fail since the last arm_*() call.
[[nodiscard]] std::uint64_t failures() noexcept;

/// Counts allocations from now on, failing none.
void arm_count() noexcept;
/// Fails the `n`th allocation from now (1: the next one) and `burst` - 1 after it, then none.
void arm_fail(std::uint64_t n, std::uint64_t burst = 1) noexcept;
/// Fails no allocation from now on (allocations() and failures() keep their values).
void disarm() noexcept;

/// Marks the calling thread's allocations as counted and subject to failure.
void subject_this_thread() noexcept;

} // namespace failing_new
