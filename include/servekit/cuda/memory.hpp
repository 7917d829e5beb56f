#pragma once
/// \file
/// Device and pinned host memory as `servekit::buffer`s (so they can sit inside tensors), their
/// allocators, and the pools built on them.

#include <servekit/core/buffer.hpp>
#include <servekit/cuda/buffer_pool.hpp>
#include <servekit/cuda/device.hpp>
#include <servekit/cuda/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>

namespace servekit::cuda {

/// Memory on one GPU (cudaMalloc, made on that device whatever the thread's current device).
class device_allocator {
public:
  explicit device_allocator(int device) noexcept : device_{device} {}

  [[nodiscard]] memory_location location() const noexcept { return memory_location::gpu(device_); }
  /// Throws cuda_error (resource_exhausted when the device is out of memory).
  [[nodiscard]] std::byte* allocate(std::size_t bytes) const {
    const device_guard on{device_};
    void* block = nullptr;
    SERVEKIT_CUDA_THROW(cudaMalloc(&block, bytes));
    return static_cast<std::byte*>(block);
  }
  /// Unified addressing tells cudaFree the owning device, so no guard is needed. An error (the
  /// context torn down at exit) cannot be reported from here and leaks nothing worth keeping.
  static void deallocate(std::byte* block, std::size_t /*bytes*/) noexcept {
    static_cast<void>(cudaFree(block));
  }

private:
  int device_;
};

/// Page-locked host memory (cudaHostAlloc): the only host memory cudaMemcpyAsync copies without
/// a hidden staging copy, and truly asynchronously. Portable, so every device's streams may use
/// it, whichever device was current when it was allocated.
class pinned_allocator {
public:
  [[nodiscard]] static constexpr memory_location location() noexcept {
    return memory_location::cpu_pinned();
  }
  /// Throws cuda_error.
  [[nodiscard]] static std::byte* allocate(std::size_t bytes) {
    void* block = nullptr;
    SERVEKIT_CUDA_THROW(cudaHostAlloc(&block, bytes, cudaHostAllocPortable));
    return static_cast<std::byte*>(block);
  }
  static void deallocate(std::byte* block, std::size_t /*bytes*/) noexcept {
    static_cast<void>(cudaFreeHost(block));
  }
};

/// Recycles device memory of one GPU: `device_pool pool{device_allocator{d}};`.
using device_pool = buffer_pool<device_allocator>;
/// Recycles pinned host memory.
using pinned_pool = buffer_pool<pinned_allocator>;

namespace detail {

/// Wraps one fresh allocation in a buffer that frees it with `Allocator::deallocate`.
template <class Allocator>
[[nodiscard]] buffer adopt_allocation(const Allocator& allocator, std::size_t bytes) {
  if (bytes == 0) {
    return buffer::adopt(nullptr, 0, allocator.location(), nullptr, nullptr);
  }
  constexpr buffer::release_fn release = [](void*, std::byte* block, std::size_t size) noexcept {
    Allocator::deallocate(block, size);
  };
  return buffer::adopt(allocator.allocate(bytes), bytes, allocator.location(), release, nullptr);
}

} // namespace detail

/// `bytes` of device memory on `device` (location gpu(device)), freed when the buffer dies. For
/// per-batch memory prefer a device_pool. Throws cuda_error.
[[nodiscard]] inline buffer allocate_device(int device, std::size_t bytes) {
  return detail::adopt_allocation(device_allocator{device}, bytes);
}

/// `bytes` of pinned host memory (location cpu_pinned), freed when the buffer dies. For
/// per-batch memory prefer a pinned_pool. Throws cuda_error.
[[nodiscard]] inline buffer allocate_pinned(std::size_t bytes) {
  return detail::adopt_allocation(pinned_allocator{}, bytes);
}

} // namespace servekit::cuda
