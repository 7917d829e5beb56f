#pragma once
/// \file
/// shape: tensor dimensions stored inline (no heap), with -1 as the "variable" wildcard in specs.

#include <servekit/core/assert.hpp>
#include <servekit/core/detail/linkage.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>

namespace servekit {

/// A list of dimensions of at most `max_rank` entries, stored inline so that building a
/// request allocates nothing for shapes. In a tensor every dimension is >= 0; in a declared
/// spec, -1 stands for "any size".
class shape {
public:
  static constexpr std::size_t max_rank = 8;
  static constexpr std::int64_t variable = -1;

  constexpr shape() noexcept = default;
  constexpr shape(std::initializer_list<std::int64_t> dims) noexcept
      : shape{std::span<const std::int64_t>{dims.begin(), dims.size()}} {}
  constexpr explicit shape(std::span<const std::int64_t> dims) noexcept {
    SERVEKIT_ASSERT(dims.size() <= max_rank, "shape rank exceeds shape::max_rank");
    for (const auto d : dims) {
      dims_[rank_++] = d;
    }
  }

  /// Returns nothing when `dims` has more than max_rank entries (for decoding untrusted input).
  [[nodiscard]] static std::optional<shape> from(std::span<const std::int64_t> dims) noexcept {
    if (dims.size() > max_rank) {
      return std::nullopt;
    }
    return shape{dims};
  }

  [[nodiscard]] constexpr std::size_t rank() const noexcept { return rank_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return rank_ == 0; }
  [[nodiscard]] constexpr std::int64_t operator[](std::size_t i) const noexcept { return dims_[i]; }
  [[nodiscard]] constexpr std::int64_t& operator[](std::size_t i) noexcept { return dims_[i]; }
  [[nodiscard]] constexpr const std::int64_t* begin() const noexcept { return dims_.data(); }
  [[nodiscard]] constexpr const std::int64_t* end() const noexcept { return dims_.data() + rank_; }
  [[nodiscard]] constexpr std::span<const std::int64_t> dims() const noexcept {
    return {dims_.data(), rank_};
  }

  constexpr void push_back(std::int64_t d) noexcept {
    SERVEKIT_ASSERT(rank_ < max_rank, "shape rank exceeds shape::max_rank");
    dims_[rank_++] = d;
  }

  /// Prepends a dimension (the batch dimension).
  [[nodiscard]] constexpr shape with_batch(std::int64_t batch) const noexcept {
    shape out;
    out.push_back(batch);
    for (const auto d : dims()) {
      out.push_back(d);
    }
    return out;
  }

  /// Drops the first dimension (the batch dimension).
  [[nodiscard]] constexpr shape without_batch() const noexcept {
    return rank_ == 0 ? shape{} : shape{dims().subspan(1)};
  }

  /// Product of the dimensions; 1 for a scalar (rank 0). Meaningless if a dim is -1.
  [[nodiscard]] constexpr std::int64_t element_count() const noexcept {
    std::int64_t n = 1;
    for (const auto d : dims()) {
      n *= d;
    }
    return n;
  }

  [[nodiscard]] constexpr bool has_variable_dim() const noexcept {
    return std::find(begin(), end(), variable) != end();
  }

  /// True when `concrete` fits this spec: same rank, each dim equal or the spec says -1.
  [[nodiscard]] constexpr bool admits(const shape& concrete) const noexcept {
    if (concrete.rank_ != rank_) {
      return false;
    }
    for (std::size_t i = 0; i < rank_; ++i) {
      if (dims_[i] != variable && dims_[i] != concrete.dims_[i]) {
        return false;
      }
    }
    return true;
  }

  friend constexpr bool operator==(const shape& a, const shape& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

private:
  std::array<std::int64_t, max_rank> dims_{};
  std::size_t rank_ = 0;
};

/// "[2,16]": the form Triton prints in its messages.
[[nodiscard]] SERVEKIT_DECL std::string to_string(const shape& s);

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/core/impl/shape.ipp>
#endif
