#pragma once
/// \file
/// buffer_pool: reuses freed blocks by size class, so a steady load allocates nothing per batch.
///
/// cudaMalloc and cudaHostAlloc are slow (they may synchronise the device), so a GPU backend must
/// not call them per batch. The pool hands out `servekit::buffer`s whose release puts the block
/// back on its size class's free list instead of freeing it. This header includes no CUDA header:
/// the pool logic is tested with host_allocator on machines without a GPU.

#include <servekit/core/assert.hpp>
#include <servekit/core/buffer.hpp>

#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <limits>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace servekit::cuda {

namespace detail {

/// Says where its memory lives, so the pool can label the buffers it hands out.
template <class A>
concept has_memory_location = requires(const A& a) {
  { a.location() } -> std::same_as<memory_location>;
};

/// Allocates a block of the given size, throwing when it cannot.
template <class A>
concept allocates_bytes = requires(A& a, std::size_t n) {
  { a.allocate(n) } -> std::same_as<std::byte*>;
};

/// Frees a block given back with its size, without throwing (buffers release in destructors).
template <class A>
concept deallocates_bytes_noexcept = requires(A& a, std::byte* p, std::size_t n) {
  { a.deallocate(p, n) }
  noexcept;
};

/// Can be moved into the pool that owns it.
template <class A>
concept movable_into_pool = std::move_constructible<A>;

} // namespace detail

/// What buffer_pool needs from the memory it recycles: device_allocator and pinned_allocator
/// (servekit/cuda/memory.hpp), host_allocator below.
template <class A>
concept pool_allocator = detail::has_memory_location<A> && detail::allocates_bytes<A> &&
    detail::deallocates_bytes_noexcept<A> && detail::movable_into_pool<A>;

/// Ordinary CPU memory, aligned as cudaMalloc aligns device memory: the pool's logic, without a
/// GPU (tests), or a pool for host staging that needs no pinning.
class host_allocator {
public:
  static constexpr std::size_t alignment = 256;

  [[nodiscard]] static constexpr memory_location location() noexcept {
    return memory_location::cpu();
  }
  [[nodiscard]] static std::byte* allocate(std::size_t bytes) {
    return static_cast<std::byte*>(::operator new (bytes, std::align_val_t{alignment}));
  }
  static void deallocate(std::byte* block, std::size_t /*bytes*/) noexcept {
    ::operator delete (block, std::align_val_t{alignment});
  }
};

/// What a pool has done, for tests and statistics.
struct pool_counters {
  std::size_t allocations = 0;    ///< blocks obtained from the allocator (the slow path)
  std::size_t reuses = 0;         ///< acquires served from a free list
  std::size_t releases = 0;       ///< buffers given back
  std::size_t outstanding = 0;    ///< buffers alive now
  std::size_t bytes_reserved = 0; ///< bytes of all blocks the pool owns, in use or free

  friend bool operator==(const pool_counters&, const pool_counters&) = default;
};

/// Hands out buffers from blocks it recycles. A request for n bytes gets a block of its size
/// class (the next power of two, at least min_block bytes); the buffer's size() is n. A released
/// block returns to its class's free list, so after warm-up a steady load calls the allocator
/// never again; trim() gives the free blocks back.
///
/// Thread-safe: a buffer may be released on any thread (a response tensor dies wherever the
/// response is consumed). One std::mutex guards the pool: a backend takes a few buffers per
/// batch, not per element, so the lock is uncontended and costs nothing next to the batch. The
/// allocator is only called under that lock, so it need not be thread-safe itself.
///
/// Buffers point back at their pool: it must outlive them (asserted on destruction), and it can
/// be neither copied nor moved.
template <pool_allocator Allocator>
class buffer_pool {
public:
  /// The smallest block: cudaMalloc's alignment, so smaller classes would save nothing.
  static constexpr std::size_t min_block = 256;

  explicit buffer_pool(Allocator allocator = Allocator{}) : allocator_{std::move(allocator)} {}
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;
  ~buffer_pool() {
    SERVEKIT_ASSERT(counters_.outstanding == 0, "buffer_pool destroyed while its buffers live");
    trim();
  }

  /// The block size that serves a request of `bytes` (`bytes` > 0).
  [[nodiscard]] static constexpr std::size_t block_size(std::size_t bytes) noexcept {
    return bytes <= min_block ? min_block : std::bit_ceil(bytes);
  }

  /// A buffer of `bytes` bytes in the allocator's memory, uninitialised. Zero bytes gives an empty
  /// buffer that holds no block. Throws what the allocator throws (cuda_error for CUDA memory),
  /// or std::bad_alloc for a size no block can hold.
  [[nodiscard]] buffer acquire(std::size_t bytes) {
    if (bytes == 0) {
      return buffer::adopt(nullptr, 0, allocator_.location(), nullptr, nullptr);
    }
    if (bytes > max_block) {
      throw std::bad_alloc{};
    }
    const std::size_t c = class_of(bytes);
    std::lock_guard lock{mutex_};
    auto& free_list = free_[c];
    if (free_list.empty()) {
      // Room in the free list for every block of the class, reserved now, so that release
      // never allocates (it runs in destructors and must not throw).
      free_list.reserve(owned_[c] + 1);
      free_list.push_back(allocator_.allocate(block_size(bytes)));
      ++owned_[c];
      ++counters_.allocations;
      counters_.bytes_reserved += block_size(bytes);
    } else {
      ++counters_.reuses;
    }
    std::byte* block = free_list.back();
    free_list.pop_back();
    ++counters_.outstanding;
    return buffer::adopt(block, bytes, allocator_.location(), &release, this);
  }

  /// Frees every block on the free lists (buffers in use are untouched).
  void trim() noexcept {
    std::lock_guard lock{mutex_};
    for (std::size_t c = 0; c < class_count; ++c) {
      const std::size_t size = min_block << c;
      for (std::byte* block : free_[c]) {
        allocator_.deallocate(block, size);
      }
      owned_[c] -= free_[c].size();
      counters_.bytes_reserved -= free_[c].size() * size;
      free_[c].clear();
    }
  }

  [[nodiscard]] pool_counters counters() const {
    std::lock_guard lock{mutex_};
    return counters_;
  }

  [[nodiscard]] memory_location location() const noexcept { return allocator_.location(); }

private:
  /// Classes min_block, 2 * min_block, ... up to the largest power of two a size_t holds.
  static constexpr std::size_t class_count =
      std::numeric_limits<std::size_t>::digits - std::countr_zero(min_block);
  static constexpr std::size_t max_block = min_block << (class_count - 1);

  static constexpr std::size_t class_of(std::size_t bytes) noexcept {
    return static_cast<std::size_t>(std::countr_zero(block_size(bytes) / min_block));
  }

  /// buffer's release function: `context` is the pool, `size` the buffer's size.
  static void release(void* context, std::byte* block, std::size_t size) noexcept {
    auto& pool = *static_cast<buffer_pool*>(context);
    std::lock_guard lock{pool.mutex_};
    pool.free_[class_of(size)].push_back(block); // capacity reserved in acquire: cannot throw
    --pool.counters_.outstanding;
    ++pool.counters_.releases;
  }

  [[no_unique_address]] Allocator allocator_;
  mutable std::mutex mutex_;
  std::array<std::vector<std::byte*>, class_count> free_{};
  std::array<std::size_t, class_count> owned_{}; ///< blocks per class, in use or free
  pool_counters counters_{};
};

} // namespace servekit::cuda
