#pragma once
/// \file
/// cache_key: the bytes that decide whether two requests may share a cached response, and
/// their hash.

#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace servekit {

namespace detail {
/// The 64x64 -> 128-bit product of `a` and `b`, folded to 64 bits (wyhash's "mum").
[[nodiscard]] inline std::uint64_t fold_multiply(std::uint64_t a, std::uint64_t b) noexcept {
  __extension__ using u128 = unsigned __int128;
  const u128 product = static_cast<u128>(a) * b;
  return static_cast<std::uint64_t>(product) ^ static_cast<std::uint64_t>(product >> 64);
}

/// A 64-bit hash of `bytes` in the style of wyhash: one 128-bit multiplication per 16 bytes, in
/// four independent lanes so that they overlap (inputs of many kilobytes are hashed on every
/// lookup; this runs at several bytes per cycle). It only spreads keys over buckets and shards:
/// equal hashes are always confirmed by comparing the bytes, so its quality decides speed,
/// never correctness.
[[nodiscard]] SERVEKIT_DECL std::uint64_t hash_cache_bytes(std::string_view bytes) noexcept;
} // namespace detail

/// What identifies a cacheable request: the model's name and version, and each input's name,
/// data type, shape and bytes, in the request's order, then the requested outputs and the
/// request's parameters (those a backend sees: a `max_tokens` changes the outputs). Two
/// requests share a response only when these bytes are identical (a hash match alone never
/// hits). Request ids, priorities, timeouts and sequence fields are not part of it: they do not
/// change the outputs.
///
/// The bytes are laid out as a header (the model, the version, every input's name, data type,
/// shape and byte count, the requested outputs; every variable-length part prefixed by its
/// length, so different requests cannot serialise alike) followed by the inputs' data.
class cache_key {
public:
  /// A key of exactly `bytes` (tests, and front ends with their own key layout).
  explicit cache_key(std::string bytes)
      : bytes_{std::move(bytes)}, hash_{detail::hash_cache_bytes(bytes_)} {}
  /// A key of `bytes` with a given hash (request_key, which hashed the parts; tests forcing
  /// collisions). Lookups still compare the bytes.
  cache_key(std::string bytes, std::uint64_t hash) noexcept
      : bytes_{std::move(bytes)}, hash_{hash} {}

  /// The key of `r` for model `model` version `version`, or nothing when an input is not in
  /// host memory (Triton caches CPU inputs only).
  [[nodiscard]] static std::optional<cache_key> of(std::string_view model, std::int64_t version,
                                                   const request& r);

  [[nodiscard]] std::string_view bytes() const noexcept { return bytes_; }
  [[nodiscard]] std::uint64_t hash() const noexcept { return hash_; }
  /// Hands the bytes over (the cache keeps them in its entry).
  [[nodiscard]] std::string release_bytes() && noexcept { return std::move(bytes_); }

  friend bool operator==(const cache_key& a, const cache_key& b) noexcept {
    return a.hash_ == b.hash_ && a.bytes_ == b.bytes_;
  }

private:
  std::string bytes_;
  std::uint64_t hash_;
};

/// A request's cache_key without copying its input data: the header bytes, the request's
/// inputs (referred to, so `r` must outlive it and stay unchanged), and the key's hash. A
/// lookup compares it with a cached key in place; only a miss copies it into a cache_key.
class request_key {
public:
  /// The key of `r`, or nothing when an input is not in host memory.
  [[nodiscard]] SERVEKIT_DECL static std::optional<request_key>
  of(std::string_view model, std::int64_t version, const request& r);

  [[nodiscard]] std::uint64_t hash() const noexcept { return hash_; }
  /// The size of the key's bytes.
  [[nodiscard]] std::size_t size() const noexcept { return header_.size() + data_size_; }

  /// Whether `stored` (a cache_key's bytes) are this key's bytes.
  [[nodiscard]] bool matches(std::string_view stored) const noexcept {
    if (stored.size() != size() || stored.substr(0, header_.size()) != header_) {
      return false;
    }
    std::size_t at = header_.size();
    for (const auto& t : *inputs_) {
      const std::string_view data = as_chars(t.data.bytes());
      if (stored.substr(at, data.size()) != data) {
        return false;
      }
      at += data.size();
    }
    return true;
  }

  /// The cache_key these bytes make (copies the input data).
  [[nodiscard]] cache_key materialize() const {
    std::string bytes;
    bytes.reserve(size());
    bytes.append(header_);
    for (const auto& t : *inputs_) {
      bytes.append(as_chars(t.data.bytes()));
    }
    return cache_key{std::move(bytes), hash_};
  }

private:
  request_key(std::string header, const tensor_list& inputs, std::size_t data_size,
              std::uint64_t hash) noexcept
      : header_{std::move(header)}, inputs_{&inputs}, data_size_{data_size}, hash_{hash} {}

  [[nodiscard]] static std::string_view as_chars(std::span<const std::byte> bytes) noexcept {
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  }

  std::string header_;
  const tensor_list* inputs_;
  std::size_t data_size_;
  std::uint64_t hash_;
};

inline std::optional<cache_key> cache_key::of(std::string_view model, std::int64_t version,
                                              const request& r) {
  const std::optional<request_key> key = request_key::of(model, version, r);
  if (!key) {
    return std::nullopt;
  }
  return key->materialize();
}

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/cache/impl/cache_key.ipp>
#endif
