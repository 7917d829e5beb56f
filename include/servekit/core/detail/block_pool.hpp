#pragma once
/// \file
/// block_pool: recycles small memory blocks between threads without locks.
///
/// Requests are built on submitting threads and destroyed on instance threads, so every
/// per-request allocation crosses threads. glibc's per-thread cache cannot keep those blocks (the
/// freeing thread is never the allocating one) and falls back to its arena lock: under load the
/// two threads then fight over that lock (measured: one futex call per two requests). This pool
/// keeps freed blocks in a per-thread cache and moves surplus, in chains of 64 blocks, to a
/// per-size-class shared stack; a thread whose cache ran dry takes one chain. Chains are taken
/// with one atomic exchange of the whole stack (the rest pushed back), so there is no ABA
/// problem, and every move between threads costs one atomic operation per 64 blocks.
///
/// Blocks are never returned to the system: the pool holds at most what was live at the peak.
/// Under AddressSanitizer the pool steps aside (plain new/delete), so use-after-free stays
/// detectable.

#include <atomic>
#include <cstddef>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define SERVEKIT_DETAIL_POOL_DISABLED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SERVEKIT_DETAIL_POOL_DISABLED 1
#endif
#endif

namespace servekit::detail {

class block_pool {
public:
  /// Size classes: 64, 128, ..., 4096 bytes. Larger blocks go straight to operator new.
  static constexpr std::size_t min_block = 64;
  static constexpr std::size_t max_block = 4096;
  static constexpr std::size_t class_count = 7;

  /// A block of at least `size` bytes, aligned for any scalar type.
  [[nodiscard]] static void* allocate(std::size_t size) {
#ifndef SERVEKIT_DETAIL_POOL_DISABLED
    if (size <= max_block) {
      const std::size_t c = class_of(size);
      cache& local = local_cache();
      if (local.head[c] == nullptr) {
        refill(local, c);
      }
      if (block* b = local.head[c]) {
        local.head[c] = b->next;
        --local.count[c];
        return b;
      }
      return ::operator new(block_size(c));
    }
#endif
    return ::operator new(size);
  }

  /// Returns a block from allocate(size), with the same size.
  static void release(void* p, [[maybe_unused]] std::size_t size) noexcept {
#ifndef SERVEKIT_DETAIL_POOL_DISABLED
    if (size <= max_block) {
      const std::size_t c = class_of(size);
      cache& local = local_cache();
      auto* b = static_cast<block*>(p);
      b->next = local.head[c];
      local.head[c] = b;
      if (++local.count[c] >= 2 * chain_length) {
        share_one_chain(local, c);
      }
      return;
    }
#endif
#if defined(__cpp_sized_deallocation)
    ::operator delete(p, size);
#else
    ::operator delete(p); // clang before 17 leaves sized deallocation off by default
#endif
  }

private:
  /// A free block. The first block of a chain on the shared stack also records the chain's
  /// last block and the next chain.
  struct block {
    block* next;
    block* last;       // chain heads only
    block* next_chain; // chain heads only
  };
  static_assert(sizeof(block) <= min_block);

  /// Blocks move between threads in chains of this many; a thread keeps fewer than twice as
  /// many per class.
  static constexpr std::size_t chain_length = 64;

  struct cache {
    block* head[class_count] = {};
    std::size_t count[class_count] = {};
    cache() = default;
    cache(const cache&) = delete;
    cache& operator=(const cache&) = delete;
    ~cache() {
      for (std::size_t c = 0; c < class_count; ++c) {
        while (count[c] >= chain_length) {
          share_one_chain(*this, c);
        }
        while (block* b = head[c]) { // fewer than a chain: back to the system
          head[c] = b->next;
          ::operator delete(b);
        }
        count[c] = 0;
      }
    }
  };

  static constexpr std::size_t class_of(std::size_t size) noexcept {
    std::size_t c = 0;
    for (std::size_t s = min_block; s < size; s <<= 1U) {
      ++c;
    }
    return c;
  }
  static constexpr std::size_t block_size(std::size_t c) noexcept { return min_block << c; }

  static cache& local_cache() noexcept {
    thread_local cache local;
    return local;
  }

  /// The shared stacks of chains live for the whole program (never destroyed, so a thread that
  /// exits during static destruction can still hand its blocks over).
  static std::atomic<block*>& shared_chains(std::size_t c) noexcept {
    static auto* stacks = new std::atomic<block*>[class_count] {};
    return stacks[c];
  }

  /// Moves the `chain_length` most recently freed blocks of class `c` to the shared stack.
  static void share_one_chain(cache& local, std::size_t c) noexcept {
    block* first = local.head[c];
    block* last = first;
    for (std::size_t i = 1; i < chain_length; ++i) {
      last = last->next;
    }
    local.head[c] = last->next;
    local.count[c] -= chain_length;
    last->next = nullptr;
    first->last = last;
    std::atomic<block*>& stack = shared_chains(c);
    block* top = stack.load(std::memory_order_relaxed);
    do {
      first->next_chain = top;
    } while (!stack.compare_exchange_weak(top, first, std::memory_order_release,
                                          std::memory_order_relaxed));
  }

  /// Takes every shared chain of class `c` (one exchange: no ABA), keeps one and shares the
  /// rest back, so that no thread hoards the pool.
  static void refill(cache& local, std::size_t c) noexcept {
    block* chains = shared_chains(c).exchange(nullptr, std::memory_order_acquire);
    if (chains == nullptr) {
      return;
    }
    block* rest = chains->next_chain;
    local.head[c] = chains;
    local.count[c] = chain_length;
    if (rest != nullptr) {
      block* rest_last = rest;
      while (rest_last->next_chain != nullptr) {
        rest_last = rest_last->next_chain;
      }
      std::atomic<block*>& stack = shared_chains(c);
      block* top = stack.load(std::memory_order_relaxed);
      do {
        rest_last->next_chain = top;
      } while (!stack.compare_exchange_weak(top, rest, std::memory_order_release,
                                            std::memory_order_relaxed));
    }
  }
};

/// Allocates with block_pool; for containers or owners that know the size at release.
template <class T, class... Args>
[[nodiscard]] T* pool_new(Args&&... args) {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  void* p = block_pool::allocate(sizeof(T));
  try {
    return ::new (p) T(static_cast<Args&&>(args)...);
  } catch (...) {
    block_pool::release(p, sizeof(T));
    throw;
  }
}

template <class T>
void pool_delete(T* p) noexcept {
  if (p != nullptr) {
    p->~T();
    block_pool::release(p, sizeof(T));
  }
}

/// A standard allocator over block_pool, for the containers a request carries from the thread
/// that builds it to the thread that destroys it.
template <class T>
struct pool_allocator {
  using value_type = T;
  pool_allocator() noexcept = default;
  template <class U>
  pool_allocator(const pool_allocator<U>&) noexcept {} // NOLINT: implicit, for rebinding
  [[nodiscard]] T* allocate(std::size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
    return static_cast<T*>(block_pool::allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept { block_pool::release(p, n * sizeof(T)); }
  template <class U>
  friend bool operator==(const pool_allocator&, const pool_allocator<U>&) noexcept {
    return true;
  }
};

} // namespace servekit::detail
