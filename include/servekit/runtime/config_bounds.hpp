#pragma once
/// \file
/// config_bounds: the upper bounds of the configuration values that would otherwise size an
/// allocation or a loop by themselves. Each is far above what a Triton model config uses in
/// practice; past it, loading fails with a config_error naming the field, the value and the
/// bound instead of a bad_alloc, a hang or an overflow. Values not listed here size nothing:
/// priority levels are stored sparsely, queue sizes and in-flight limits are counters, and
/// timeouts saturate at "never" (see docs/configuration.md, "Bounds").

#include <servekit/core/detail/linkage.hpp>
#include <servekit/runtime/model_options.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace servekit {

/// The largest max_batch_size: the statistics keep counters for every batch size up to it,
/// and a sequence model keeps that many slots on every instance. Triton models batch at most
/// a few thousand requests.
inline constexpr std::int32_t max_batch_size_limit = 65536;

/// The most sequence slots (instances x slots per instance) a sequence model may have: every
/// slot is an entry of the sequence table made at load. 1024 instances of 1024 slots, or 16
/// instances of 65536 candidates.
inline constexpr std::uint64_t max_sequence_slots_per_model = std::uint64_t{1} << 20U;

/// The most executions of one warmup sample (`model_warmup[].count`): they all run before the
/// model is ready. Warmups use a handful.
inline constexpr std::uint32_t max_warmup_count = 10'000;

/// The most bytes a tensor the config alone sizes may take: a warmup input (all its rows) and
/// one sequence's implicit state or its initial value, which are allocated at load. 4 GiB holds
/// a large language model's per-sequence cache.
inline constexpr std::uint64_t max_config_tensor_bytes = std::uint64_t{1} << 32U;

namespace detail {

/// `rows` x the product of `dims` x `element_bytes`, or nullopt when that does not fit 64
/// bits. Variable (-1) and non-positive dims count as 1 (they size nothing at load; other
/// checks refuse the ones that are wrong).
[[nodiscard]] SERVEKIT_DECL std::optional<std::uint64_t>
checked_byte_size(std::span<const std::int64_t> dims, std::uint64_t element_bytes,
                  std::uint64_t rows = 1) noexcept;

/// Throws config_error when a value of `options` is past its bound (max_batch_size is the
/// resolved one: the config's or the backend's).
SERVEKIT_DECL void check_config_bounds(const model_options& options, std::int32_t max_batch_size);

/// Throws config_error when `instances` x `slots_per_instance` is past
/// max_sequence_slots_per_model.
SERVEKIT_DECL void check_sequence_slots(std::size_t instances, std::size_t slots_per_instance);

} // namespace detail
} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/runtime/impl/config_bounds.ipp>
#endif
