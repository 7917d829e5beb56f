#pragma once
/// \file
/// response_cache: the server-wide cache of successful responses (Triton's local response
/// cache), bounded in bytes with least-recently-used eviction.

#include <servekit/cache/cache_config.hpp>
#include <servekit/cache/cache_key.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace servekit {

/// What a response_cache holds and has done, summed over its shards.
struct response_cache_counters {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t insertions = 0;
  std::uint64_t evictions = 0;
  std::uint64_t entries = 0;
  std::uint64_t bytes_in_use = 0;
  friend bool operator==(const response_cache_counters&, const response_cache_counters&) = default;
};

/// A thread-safe map from cache_key to the outputs of a successful response, holding at most
/// `settings.size_bytes` (keys, outputs and a fixed overhead per entry; see entry_bytes). When
/// an insertion would pass the bound, the least recently used entries (looked up or inserted
/// longest ago) are evicted first; an entry larger than the bound is not inserted.
///
/// One cache serves every model of a server (give it to them in model_environment): keys name
/// the model and version. Lookups copy the outputs out, so a cached response stays valid while
/// an eviction or another thread's lookup runs. Each shard is one mutex; the copy of a hit's
/// outputs happens outside it.
///
///     auto cache = std::make_shared<servekit::response_cache>(
///         servekit::parse_cache_config("local,size=1048576"));
///     servekit::model<my_backend> m{options, {}, {.cache = cache}};
class response_cache {
public:
  /// Per entry, beyond its key and output bytes: the entry, its tensors' headers and the
  /// bookkeeping nodes, rounded up. Part of the size bound so that many tiny entries cannot
  /// hold unbounded memory.
  static constexpr std::size_t entry_overhead = 128;

  explicit response_cache(response_cache_settings settings) : settings_{settings} {
    if (settings_.shards == 0) {
      throw config_error{config_error_code::bad_value, "",
                         "response_cache: shards must be at least 1"};
    }
    if (settings_.shards > response_cache_settings::max_shards) {
      throw config_error{config_error_code::bad_value, "",
                         "response_cache: shards must be at most " +
                             std::to_string(response_cache_settings::max_shards) + ", got " +
                             std::to_string(settings_.shards)};
    }
    shards_ = std::make_unique<shard[]>(settings_.shards);
    for (std::size_t i = 0; i < settings_.shards; ++i) {
      shards_[i].capacity = settings_.size_bytes / settings_.shards;
    }
  }

  response_cache(const response_cache&) = delete;
  response_cache& operator=(const response_cache&) = delete;

  /// Copies of the outputs cached for `key`, or nothing; a hit makes the entry the most
  /// recently used.
  [[nodiscard]] std::optional<tensor_list> lookup(const cache_key& key) {
    return lookup(key.hash(), [&key](std::string_view stored) { return stored == key.bytes(); });
  }

  /// The same for a request's key, compared in place with the cached keys (nothing is copied
  /// unless it hits).
  [[nodiscard]] std::optional<tensor_list> lookup(const request_key& key) {
    return lookup(key.hash(), [&key](std::string_view stored) { return key.matches(stored); });
  }

  /// Caches copies of `outputs` under `key`, evicting least recently used entries to make
  /// room. Returns false, changing nothing, when an output is not in host memory, the entry
  /// is larger than a shard's bound, or `key` is already cached (two misses of one key raced:
  /// the first insertion stays, and becomes the most recently used).
  SERVEKIT_DECL bool insert(cache_key key, const tensor_list& outputs);

  /// Drops every entry (counters other than entries and bytes are kept).
  void clear() {
    for (std::size_t i = 0; i < settings_.shards; ++i) {
      shard& s = shards_[i];
      std::list<std::shared_ptr<const entry>> dropped;
      const std::lock_guard lock{s.mutex};
      s.index.clear();
      dropped.swap(s.lru);
      s.bytes_in_use = 0;
    }
  }

  [[nodiscard]] response_cache_counters counters() const {
    response_cache_counters sum;
    for (std::size_t i = 0; i < settings_.shards; ++i) {
      const shard& s = shards_[i];
      const std::lock_guard lock{s.mutex};
      sum.hits += s.counters.hits;
      sum.misses += s.counters.misses;
      sum.insertions += s.counters.insertions;
      sum.evictions += s.counters.evictions;
      sum.entries += s.lru.size();
      sum.bytes_in_use += s.bytes_in_use;
    }
    return sum;
  }

  [[nodiscard]] const response_cache_settings& settings() const noexcept { return settings_; }
  [[nodiscard]] std::size_t capacity_bytes() const noexcept { return settings_.size_bytes; }

  /// The bytes an entry of `key` and `outputs` counts against the bound: the key, each output's
  /// name and data, and entry_overhead.
  [[nodiscard]] SERVEKIT_DECL static std::size_t entry_bytes(const cache_key& key,
                                                             const tensor_list& outputs) noexcept;

private:
  struct entry {
    entry(std::string k, std::uint64_t h, tensor_list o, std::size_t b)
        : key{std::move(k)}, hash{h}, outputs{std::move(o)}, bytes{b} {}
    std::string key;
    std::uint64_t hash;
    tensor_list outputs;
    std::size_t bytes;
  };

  /// An index key: the precomputed hash and a view of the key bytes (owned by the entry).
  struct key_ref {
    std::uint64_t hash;
    std::string_view bytes;
    friend bool operator==(const key_ref& a, const key_ref& b) noexcept {
      return a.hash == b.hash && a.bytes == b.bytes; // a hash match alone is never a hit
    }
  };
  struct key_ref_hash {
    std::size_t operator()(const key_ref& k) const noexcept {
      return static_cast<std::size_t>(k.hash);
    }
  };

  using lru_list = std::list<std::shared_ptr<const entry>>;

  struct shard {
    mutable std::mutex mutex;
    lru_list lru; ///< most recently used first
    std::unordered_map<key_ref, lru_list::iterator, key_ref_hash> index;
    std::size_t capacity = 0;
    std::size_t bytes_in_use = 0;
    response_cache_counters counters;
  };

  /// The entry of hash `hash` whose key bytes satisfy `same`, copied out.
  template <class Same>
  [[nodiscard]] std::optional<tensor_list> lookup(std::uint64_t hash, Same same) {
    std::shared_ptr<const entry> found;
    {
      shard& s = shard_of(hash);
      const std::lock_guard lock{s.mutex};
      if (s.index.bucket_count() == 0) { // bucket() needs one; an empty map may have none
        ++s.counters.misses;
        return std::nullopt;
      }
      // The index hashes a key_ref to its hash, so every entry of this hash is in this bucket.
      const std::size_t bucket = s.index.bucket(key_ref{hash, {}});
      for (auto it = s.index.begin(bucket); it != s.index.end(bucket); ++it) {
        if (it->first.hash == hash && same(it->first.bytes)) { // never the hash alone
          ++s.counters.hits;
          s.lru.splice(s.lru.begin(), s.lru, it->second); // most recently used first
          found = *it->second;
          break;
        }
      }
      if (!found) {
        ++s.counters.misses;
        return std::nullopt;
      }
    }
    return copy_of(found->outputs);
  }

  [[nodiscard]] shard& shard_of(std::uint64_t hash) noexcept {
    // The high bits pick the shard; the map's buckets use the low ones.
    return shards_[settings_.shards == 1 ? 0 : (hash >> 32) % settings_.shards];
  }

  [[nodiscard]] SERVEKIT_DECL static tensor_list copy_of(const tensor_list& outputs);

  response_cache_settings settings_;
  std::unique_ptr<shard[]> shards_;
};

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/cache/impl/response_cache.ipp>
#endif
