// servekit.test.http_alloc's replacement of every form of the global operator new and delete
// (failing_new.hpp). A program may replace them once; this executable is apart from
// servekit.test.http so that its allocations can fail without touching that suite.
#include "failing_new.hpp"

#include <execinfo.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>

namespace failing_new {

std::atomic<std::int64_t> live{0};
std::atomic<std::int64_t> peak{0};

namespace {

constexpr std::uint64_t never = std::numeric_limits<std::uint64_t>::max();

std::atomic<bool> armed{false};
std::atomic<std::uint64_t> seen{0};
std::atomic<std::uint64_t> failed{0};
// Allocations number fail_from .. fail_to - 1 (counted from 1 after arming) fail.
std::atomic<std::uint64_t> fail_from{never};
std::atomic<std::uint64_t> fail_to{never};
// Only the threads marked subject see failures and are counted (the server's I/O thread);
// the trace below marks its own allocations exempt.
thread_local bool subject = false;
thread_local bool exempt = false;

void add(void* p) noexcept {
  const auto n = static_cast<std::int64_t>(malloc_usable_size(p));
  const auto now = live.fetch_add(n, std::memory_order_relaxed) + n;
  auto high = peak.load(std::memory_order_relaxed);
  while (now > high && !peak.compare_exchange_weak(high, now, std::memory_order_relaxed)) {
  }
}

void remove(void* p) noexcept {
  live.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
}

/// Whether this allocation is one to fail.
bool should_fail() noexcept {
  if (!subject || exempt || !armed.load(std::memory_order_acquire)) {
    return false;
  }
  const std::uint64_t k = seen.fetch_add(1, std::memory_order_relaxed) + 1;
  if (k >= fail_from.load(std::memory_order_relaxed) &&
      k < fail_to.load(std::memory_order_relaxed)) {
    failed.fetch_add(1, std::memory_order_relaxed);
    if (std::getenv("FAILING_NEW_TRACE") != nullptr) {
      void* frames[32];
      const bool was = exempt;
      exempt = true;
      ::backtrace_symbols_fd(frames, ::backtrace(frames, 32), 2);
      ::write(2, "----\n", 5);
      exempt = was;
    }
    return true;
  }
  return false;
}

void* allocate(std::size_t n, std::size_t alignment) noexcept {
  if (should_fail()) {
    return nullptr;
  }
  n = n == 0 ? 1 : n;
  void* p = nullptr;
  if (alignment <= alignof(std::max_align_t)) {
    p = std::malloc(n);
  } else if (::posix_memalign(&p, alignment, n) != 0) {
    p = nullptr;
  }
  if (p != nullptr) {
    add(p);
  }
  return p;
}

void* allocate_or_throw(std::size_t n, std::size_t alignment) {
  void* p = allocate(n, alignment);
  if (p == nullptr) {
    throw std::bad_alloc{};
  }
  return p;
}

void deallocate(void* p) noexcept {
  if (p != nullptr) {
    remove(p);
    std::free(p);
  }
}

} // namespace

std::uint64_t allocations() noexcept { return seen.load(std::memory_order_relaxed); }
std::uint64_t failures() noexcept { return failed.load(std::memory_order_relaxed); }

void arm_count() noexcept { arm_fail(never, 0); }

void arm_fail(std::uint64_t n, std::uint64_t burst) noexcept {
  armed.store(false, std::memory_order_release);
  seen.store(0, std::memory_order_relaxed);
  failed.store(0, std::memory_order_relaxed);
  fail_from.store(n, std::memory_order_relaxed);
  fail_to.store(n == never || burst > never - n ? never : n + burst, std::memory_order_relaxed);
  armed.store(true, std::memory_order_release);
}

void disarm() noexcept {
  fail_from.store(never, std::memory_order_relaxed);
  armed.store(false, std::memory_order_release);
}

void subject_this_thread() noexcept { subject = true; }

} // namespace failing_new

using failing_new::allocate;
using failing_new::allocate_or_throw;
using failing_new::deallocate;

void* operator new(std::size_t n) { return allocate_or_throw(n, 0); }
void* operator new[](std::size_t n) { return allocate_or_throw(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) {
  return allocate_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return allocate_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t& /*tag*/) noexcept { return allocate(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t& /*tag*/) noexcept {
  return allocate(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t& /*tag*/) noexcept {
  return allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t& /*tag*/) noexcept {
  return allocate(n, static_cast<std::size_t>(a));
}

void operator delete(void* p) noexcept { deallocate(p); }
void operator delete[](void* p) noexcept { deallocate(p); }
void operator delete(void* p, std::size_t /*size*/) noexcept { deallocate(p); }
void operator delete[](void* p, std::size_t /*size*/) noexcept { deallocate(p); }
void operator delete(void* p, std::align_val_t /*alignment*/) noexcept { deallocate(p); }
void operator delete[](void* p, std::align_val_t /*alignment*/) noexcept { deallocate(p); }
void operator delete(void* p, std::size_t /*size*/, std::align_val_t /*alignment*/) noexcept {
  deallocate(p);
}
void operator delete[](void* p, std::size_t /*size*/, std::align_val_t /*alignment*/) noexcept {
  deallocate(p);
}
void operator delete(void* p, const std::nothrow_t& /*tag*/) noexcept { deallocate(p); }
void operator delete[](void* p, const std::nothrow_t& /*tag*/) noexcept { deallocate(p); }
void operator delete(void* p, std::align_val_t /*alignment*/,
                     const std::nothrow_t& /*tag*/) noexcept {
  deallocate(p);
}
void operator delete[](void* p, std::align_val_t /*alignment*/,
                       const std::nothrow_t& /*tag*/) noexcept {
  deallocate(p);
}
