#pragma once
/// \file
/// Definitions for servekit/cache/cache_key.hpp. Compiled once into servekit::servekit, or included
/// by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/cache/cache_key.hpp>
#include <servekit/core/detail/linkage.hpp>

#include <type_traits>
#include <variant>

namespace servekit::detail {

[[nodiscard]] SERVEKIT_DECL std::uint64_t hash_cache_bytes(std::string_view bytes) noexcept {
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

} // namespace servekit::detail

namespace servekit {

[[nodiscard]] SERVEKIT_DECL std::optional<request_key>
request_key::of(std::string_view model, std::int64_t version, const request& r) {
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
  header_size += sizeof(std::uint64_t);
  for (const auto& p : r.parameters) {
    header_size += 3 * sizeof(std::uint64_t) + 1 + p.name.size();
    if (const auto* text = std::get_if<std::string>(&p.value)) {
      header_size += text->size();
    }
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
  // The parameters a backend reads may change its outputs (max_tokens, say): they are part of
  // the key, each as its name, its type and its value, in the request's order.
  put_u64(r.parameters.size());
  for (const auto& p : r.parameters) {
    put_text(p.name);
    const auto type = static_cast<unsigned char>(p.value.index());
    put(&type, 1);
    std::visit(
        [&](const auto& v) {
          using value_type = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<value_type, std::string>) {
            put_text(v);
          } else if constexpr (std::is_same_v<value_type, bool>) {
            put_u64(v ? 1 : 0);
          } else {
            put(&v, sizeof v);
          }
        },
        p.value);
  }
  // The hash combines the header's and each input's, read where they are.
  std::uint64_t h = detail::hash_cache_bytes(header);
  for (const auto& t : r.inputs) {
    h = detail::fold_multiply(h ^ detail::hash_cache_bytes(as_chars(t.data.bytes())),
                              0x9E3779B97F4A7C15ULL);
  }
  return request_key{std::move(header), r.inputs, data_size, h};
}

} // namespace servekit
