#pragma once
/// \file
/// cache_key: the bytes that decide whether two requests may share a cached response, and
/// their hash.

#include <servekit/core/data_type.hpp>
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
[[nodiscard]] inline std::uint64_t hash_cache_bytes(std::string_view bytes) noexcept {
  constexpr std::uint64_t secret[4] = {0xA0761D6478BD642FULL, 0xE7037ED1A0B428DBULL,
                                       0x8EBC6AF09C88C6E3ULL, 0x589965CC75374CC3ULL};
  const auto load = [](const char* p) noexcept {
    std::uint64_t w = 0;
    std::memcpy(&w, p, sizeof w);
    return w;
  };
  const char* p = bytes.data();
  std::size_t n = bytes.size();
  std::uint64_t lane[4] = {secret[0], secret[1], secret[2], secret[3]};
  for (; n >= 64; p += 64, n -= 64) {
    for (std::size_t i = 0; i < 4; ++i) {
      lane[i] = fold_multiply(load(p + 16 * i) ^ secret[i], load(p + 16 * i + 8) ^ lane[i]);
    }
  }
  std::uint64_t h = static_cast<std::uint64_t>(bytes.size()) ^ secret[0];
  for (std::size_t i = 0; i < 4; ++i) {
    h = fold_multiply(h ^ lane[i], secret[(i + 1) % 4]);
  }
  for (; n >= 16; p += 16, n -= 16) {
    h = fold_multiply(load(p) ^ secret[1], load(p + 8) ^ h);
  }
  std::uint64_t a = 0;
  std::uint64_t b = 0;
  if (n > 8) {
    a = load(p);
    std::memcpy(&b, p + 8, n - 8);
  } else if (n != 0) {
    std::memcpy(&a, p, n);
  }
  h = fold_multiply(a ^ secret[2], b ^ h);
  return fold_multiply(h ^ secret[3], h ^ static_cast<std::uint64_t>(bytes.size()));
}
} // namespace detail

/// What identifies a cacheable request: the model's name and version, and each input's name,
/// data type, shape and bytes, in the request's order, then the requested outputs. Two requests
/// share a response only when these bytes are identical (a hash match alone never hits).
/// Request ids, priorities, timeouts and parameters are not part of it: they do not change
/// the outputs.
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
  [[nodiscard]] static std::optional<request_key> of(std::string_view model, std::int64_t version,
                                                     const request& r) {
    std::size_t header_size = 3 * sizeof(std::uint64_t) + model.size() + sizeof(std::int64_t);
    std::size_t data_size = 0;
    for (const auto& t : r.inputs) {
      if (!t.data.location().host_accessible()) {
        return std::nullopt;
      }
      header_size +=
          3 * sizeof(std::uint64_t) + 1 + t.name.size() + t.shape.rank() * sizeof(std::int64_t);
      data_size += t.data.size();
    }
    for (const auto& o : r.requested_outputs) {
      header_size += sizeof(std::uint64_t) + o.size();
    }
    std::string header;
    header.reserve(header_size);
    auto put = [&header](const void* p, std::size_t n) {
      header.append(static_cast<const char*>(p), n);
    };
    auto put_u64 = [&put](std::uint64_t v) { put(&v, sizeof v); };
    auto put_text = [&](std::string_view s) {
      put_u64(s.size());
      put(s.data(), s.size());
    };
    put_text(model);
    put(&version, sizeof version);
    put_u64(r.inputs.size());
    for (const auto& t : r.inputs) {
      put_text(t.name);
      const auto type = static_cast<std::uint8_t>(t.type);
      put(&type, 1);
      put_u64(t.shape.rank());
      put(t.shape.dims().data(), t.shape.rank() * sizeof(std::int64_t));
      put_u64(t.data.size());
    }
    put_u64(r.requested_outputs.size());
    for (const auto& o : r.requested_outputs) {
      put_text(o);
    }
    // The hash combines the header's and each input's, read where they are.
    std::uint64_t h = detail::hash_cache_bytes(header);
    for (const auto& t : r.inputs) {
      h = detail::fold_multiply(h ^ detail::hash_cache_bytes(as_chars(t.data.bytes())),
                                0x9E3779B97F4A7C15ULL);
    }
    return request_key{std::move(header), r.inputs, data_size, h};
  }

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
