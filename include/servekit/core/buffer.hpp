#pragma once
/// \file
/// buffer: owning bytes with a memory location (CPU, pinned CPU or a GPU).

#include <servekit/core/assert.hpp>
#include <servekit/core/detail/block_pool.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <utility>

namespace servekit {

/// Where a buffer's bytes live.
enum class memory_kind : std::uint8_t { cpu, cpu_pinned, gpu };

/// A memory kind plus the device it belongs to (meaningful for gpu).
struct memory_location {
  memory_kind kind = memory_kind::cpu;
  int device_id = 0;

  [[nodiscard]] static constexpr memory_location cpu() noexcept { return {}; }
  [[nodiscard]] static constexpr memory_location cpu_pinned() noexcept {
    return {memory_kind::cpu_pinned, 0};
  }
  [[nodiscard]] static constexpr memory_location gpu(int device) noexcept {
    return {memory_kind::gpu, device};
  }
  [[nodiscard]] constexpr bool host_accessible() const noexcept { return kind != memory_kind::gpu; }
  friend constexpr bool operator==(memory_location, memory_location) noexcept = default;
};

/// Owning, move-only bytes. CPU buffers come from a lock-free block pool (small ones) or the heap,
/// aligned for any scalar type; pinned and device memory is adopted from an allocator (see
/// servekit/cuda) with a release function called on destruction, once per buffer.
///
/// The bytes never move when the buffer does: a pointer into a tensor's data stays valid while
/// the tensor travels through vectors, queues and batches (and while an async copy reads it).
/// That is why there is no small-buffer optimisation here.
class buffer {
public:
  static constexpr std::size_t alignment = __STDCPP_DEFAULT_NEW_ALIGNMENT__;
  using release_fn = void (*)(void* context, std::byte* data, std::size_t size) noexcept;

  buffer() noexcept = default;
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  buffer(buffer&& other) noexcept { take(other); }
  buffer& operator=(buffer&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  ~buffer() { reset(); }

  /// Uninitialised CPU bytes.
  [[nodiscard]] static buffer allocate(std::size_t size) {
    buffer b;
    b.size_ = size;
    if (size != 0) {
      b.data_ = static_cast<std::byte*>(detail::block_pool::allocate(size));
      b.release_ = &release_pooled;
    }
    return b;
  }

  /// Zero-filled CPU bytes.
  [[nodiscard]] static buffer zeroed(std::size_t size) {
    buffer b = allocate(size);
    if (size != 0) {
      std::memset(b.data_, 0, size);
    }
    return b;
  }

  /// A CPU copy of `bytes`.
  [[nodiscard]] static buffer copy_of(std::span<const std::byte> bytes) {
    buffer b = allocate(bytes.size());
    if (!bytes.empty()) {
      std::memcpy(b.data_, bytes.data(), bytes.size());
    }
    return b;
  }

  /// Takes ownership of memory from another allocator; `release(context, data, size)` frees it.
  [[nodiscard]] static buffer adopt(std::byte* data, std::size_t size, memory_location location,
                                    release_fn release, void* context) noexcept {
    buffer b;
    b.data_ = data;
    b.size_ = size;
    b.location_ = location;
    b.release_ = release;
    b.context_ = context;
    return b;
  }

  [[nodiscard]] std::byte* data() noexcept { return data_; }
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] memory_location location() const noexcept { return location_; }

  /// Host-accessible bytes (asserts the buffer is not device memory).
  [[nodiscard]] std::span<std::byte> bytes() noexcept {
    SERVEKIT_ASSERT(location_.host_accessible(), "bytes() on device memory");
    return {data_, size_};
  }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept {
    SERVEKIT_ASSERT(location_.host_accessible(), "bytes() on device memory");
    return {data_, size_};
  }

private:
  static void release_pooled(void*, std::byte* data, std::size_t size) noexcept {
    detail::block_pool::release(data, size);
  }

  void reset() noexcept {
    if (release_ != nullptr) {
      release_(context_, data_, size_);
    }
    data_ = nullptr;
    size_ = 0;
    release_ = nullptr;
    context_ = nullptr;
    location_ = {};
  }

  void take(buffer& other) noexcept {
    size_ = other.size_;
    location_ = other.location_;
    release_ = other.release_;
    context_ = other.context_;
    data_ = other.data_;
    other.data_ = nullptr;
    other.size_ = 0;
    other.release_ = nullptr;
    other.context_ = nullptr;
    other.location_ = {};
  }

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  release_fn release_ = nullptr;
  void* context_ = nullptr;
  memory_location location_{};
};

} // namespace servekit
