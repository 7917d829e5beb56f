#pragma once
/// \file
/// The 16-bit float conversions FP16 and BF16 tensors need: float_to_half / half_to_float (IEEE
/// binary16) and float_to_bf16 / bf16_to_float (bfloat16), bit patterns in std::uint16_t.

#include <bit>
#include <cmath>
#include <cstdint>

namespace servekit::http::detail {

/// IEEE binary32 -> binary16, round to nearest even; overflow gives infinity.
[[nodiscard]] inline std::uint16_t float_to_half(float value) noexcept {
  const auto x = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint32_t>((x >> 16U) & 0x8000U);
  std::uint32_t mant = x & 0x7FFFFFU;
  const auto exp = static_cast<int>((x >> 23U) & 0xFFU);
  if (exp == 0xFF) { // infinity or NaN (keep NaN quiet)
    return static_cast<std::uint16_t>(sign | 0x7C00U | (mant != 0 ? 0x200U : 0U));
  }
  const int e = exp - 127 + 15;
  if (e >= 31) {
    return static_cast<std::uint16_t>(sign | 0x7C00U);
  }
  if (e <= 0) { // a half subnormal, or zero
    if (e < -10) {
      return static_cast<std::uint16_t>(sign);
    }
    mant |= 0x800000U;
    const auto shift = static_cast<std::uint32_t>(14 - e);
    std::uint32_t half_mant = mant >> shift;
    const std::uint32_t rest = mant & ((1U << shift) - 1U);
    const std::uint32_t halfway = 1U << (shift - 1U);
    if (rest > halfway || (rest == halfway && (half_mant & 1U) != 0)) {
      ++half_mant; // may carry into the smallest normal: still the right encoding
    }
    return static_cast<std::uint16_t>(sign | half_mant);
  }
  std::uint32_t half = sign | (static_cast<std::uint32_t>(e) << 10U) | (mant >> 13U);
  const std::uint32_t rest = mant & 0x1FFFU;
  if (rest > 0x1000U || (rest == 0x1000U && (half & 1U) != 0)) {
    ++half; // may carry into the exponent, up to infinity: the right rounding
  }
  return static_cast<std::uint16_t>(half);
}

/// IEEE binary16 -> binary32 (exact).
[[nodiscard]] inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000U) << 16U;
  const std::uint32_t exp = (static_cast<std::uint32_t>(h) >> 10U) & 0x1FU;
  const std::uint32_t mant = static_cast<std::uint32_t>(h) & 0x3FFU;
  if (exp == 0) {
    const float magnitude = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exp == 31) {
    return std::bit_cast<float>(sign | 0x7F800000U | (mant << 13U));
  }
  return std::bit_cast<float>(sign | ((exp + 112U) << 23U) | (mant << 13U));
}

/// binary32 -> bfloat16, round to nearest even.
[[nodiscard]] inline std::uint16_t float_to_bf16(float value) noexcept {
  const auto x = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) {
    return static_cast<std::uint16_t>((x >> 16U) | 0x40U);
  }
  const std::uint32_t rounding = 0x7FFFU + ((x >> 16U) & 1U);
  return static_cast<std::uint16_t>((x + rounding) >> 16U);
}

[[nodiscard]] inline float bf16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16U);
}

} // namespace servekit::http::detail
