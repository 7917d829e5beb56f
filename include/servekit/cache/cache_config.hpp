#pragma once
/// \file
/// response_cache_settings and parse_cache_config: the server's `--cache-config` flag
/// (Triton's syntax, `local,size=1048576`) as the settings of a servekit::response_cache.

#include <servekit/core/config_error.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace servekit {

/// How large a response_cache is and how it is split.
struct response_cache_settings {
  /// The bound on the bytes the cache holds: keys, outputs and a fixed per-entry overhead
  /// (see response_cache::entry_bytes). Least recently used entries are evicted to stay under it.
  std::size_t size_bytes = 0;
  /// servekit extension: independent parts, each with its own lock, LRU list and
  /// `size_bytes / shards` bytes, chosen by the key's hash. 1 (the default) is one exact LRU
  /// over the whole size; more shards cut lock contention when many threads hit the cache.
  std::size_t shards = 1;
  /// The most shards: each is made (a lock, a list and a map) when the cache is; a shard per
  /// core is already plenty.
  static constexpr std::size_t max_shards = 1024;
  friend bool operator==(const response_cache_settings&, const response_cache_settings&) = default;
};

namespace detail {
[[nodiscard]] inline config_error cache_config_error(std::string_view text,
                                                     const std::string& why) {
  return config_error{config_error_code::bad_value, "",
                      "--cache-config '" + std::string{text} + "': " + why};
}

[[nodiscard]] inline std::size_t parse_cache_count(std::string_view text, std::string_view key,
                                                   std::string_view value) {
  std::uint64_t n = 0;
  const auto* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, n);
  if (value.empty() || ec != std::errc{} || ptr != end) {
    throw cache_config_error(text, "'" + std::string{key} +
                                       "' must be a non-negative integer, got '" +
                                       std::string{value} + "'");
  }
  return static_cast<std::size_t>(n);
}
} // namespace detail

/// Parses the value of `--cache-config`: `local,size=N[,shards=K]`, Triton's local cache with a
/// size in bytes (`shards` is a servekit extension). Spaces around items are not allowed, as in
/// Triton. Throws config_error saying what is wrong: another cache implementation (Triton's
/// `redis` is not supported), an unknown or repeated key, a missing or zero size, a bad number.
///
///     auto cache = std::make_shared<servekit::response_cache>(
///         servekit::parse_cache_config("local,size=1048576"));
[[nodiscard]] inline response_cache_settings parse_cache_config(std::string_view text) {
  const auto comma = text.find(',');
  const std::string_view implementation = text.substr(0, comma);
  if (implementation.empty()) {
    throw detail::cache_config_error(
        text, "expected '<implementation>,<key>=<value>...', e.g. 'local,size=1048576'");
  }
  if (implementation != "local") {
    throw detail::cache_config_error(text, "unsupported cache implementation '" +
                                               std::string{implementation} +
                                               "' (servekit has 'local' only)");
  }
  response_cache_settings settings;
  bool has_size = false;
  bool has_shards = false;
  std::string_view rest =
      comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  while (comma != std::string_view::npos) {
    const auto next = rest.find(',');
    const std::string_view item = rest.substr(0, next);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw detail::cache_config_error(text,
                                       "expected '<key>=<value>', got '" + std::string{item} + "'");
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    if (key == "size") {
      if (has_size) {
        throw detail::cache_config_error(text, "'size' given twice");
      }
      has_size = true;
      settings.size_bytes = detail::parse_cache_count(text, key, value);
    } else if (key == "shards") {
      if (has_shards) {
        throw detail::cache_config_error(text, "'shards' given twice");
      }
      has_shards = true;
      settings.shards = detail::parse_cache_count(text, key, value);
      if (settings.shards == 0) {
        throw detail::cache_config_error(text, "'shards' must be at least 1");
      }
      if (settings.shards > response_cache_settings::max_shards) {
        throw detail::cache_config_error(text,
                                         "'shards' must be at most " +
                                             std::to_string(response_cache_settings::max_shards) +
                                             ", got " + std::to_string(settings.shards));
      }
    } else {
      throw detail::cache_config_error(text, "unknown key '" + std::string{key} +
                                                 "' for the local cache (known: size, shards)");
    }
    if (next == std::string_view::npos) {
      break;
    }
    rest = rest.substr(next + 1);
  }
  if (!has_size) {
    throw detail::cache_config_error(text, "the local cache needs 'size=<bytes>'");
  }
  if (settings.size_bytes == 0) {
    throw detail::cache_config_error(text, "'size' must be greater than 0");
  }
  return settings;
}

} // namespace servekit
