#pragma once
/// \file
/// The KV cache as the iteration scheduler accounts for it: a fixed number of fixed-size blocks,
/// each holding the keys and values of `block_size` consecutive tokens of one sequence. The
/// backend owns the memory; this pool only hands out block ids and counts references.
///
/// Prefix caching, as vLLM v1 does it: a block that is full gets a key, the hash of its parent
/// block's key and its own tokens, so a key names a whole prefix. A new sequence whose first full
/// blocks have keys in the cache takes references on those blocks instead of computing them. A
/// block nobody references stays cached in the free queue, least recently freed first, until an
/// allocation evicts it. Unlike a bare hash lookup, a hit is checked against the block's stored
/// tokens and its parent's key: a wrong hit needs two different prefixes whose 64-bit keys
/// collide.

#include <servekit/core/detail/linkage.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace servekit {

/// A token of a generative model's vocabulary.
using token_id = std::int32_t;
/// A block of the KV cache: an index in [0, num_blocks).
using kv_block_id = std::uint32_t;

/// What the pool has done since it was made.
struct kv_block_pool_stats {
  std::uint64_t prefix_queries = 0;      ///< match_prefix calls
  std::uint64_t prefix_query_tokens = 0; ///< tokens those calls could have found
  std::uint64_t prefix_hit_tokens = 0;   ///< tokens they found
  std::uint64_t allocated_blocks = 0;    ///< blocks handed out by allocate
  std::uint64_t evicted_blocks = 0;      ///< cached blocks whose key an allocation dropped
  /// Hit tokens over queried tokens; 0 before the first query.
  [[nodiscard]] double hit_rate() const noexcept {
    return prefix_query_tokens == 0
               ? 0.0
               : static_cast<double>(prefix_hit_tokens) / static_cast<double>(prefix_query_tokens);
  }
};

/// Block ids with reference counts, a free queue in eviction order, and the prefix cache.
/// Not thread-safe: its owner (the iteration scheduler's core) serialises calls.
class kv_block_pool {
public:
  /// `num_blocks` blocks of `block_size` tokens (both at least 1).
  SERVEKIT_DECL kv_block_pool(std::uint32_t num_blocks, std::uint32_t block_size,
                              bool enable_prefix_caching);

  [[nodiscard]] std::uint32_t num_blocks() const noexcept {
    return static_cast<std::uint32_t>(blocks_.size());
  }
  [[nodiscard]] std::uint32_t block_size() const noexcept { return block_size_; }
  [[nodiscard]] bool prefix_caching() const noexcept { return prefix_caching_; }
  /// Blocks nobody references (cached ones included): what allocate can hand out.
  [[nodiscard]] std::uint32_t free_blocks() const noexcept { return free_count_; }
  /// The share of blocks referenced, in [0, 1] (vLLM's kv_cache_usage_perc).
  [[nodiscard]] double usage() const noexcept {
    return 1.0 - static_cast<double>(free_count_) / static_cast<double>(blocks_.size());
  }
  [[nodiscard]] std::uint32_t ref_count(kv_block_id b) const noexcept { return blocks_[b].refs; }
  [[nodiscard]] const kv_block_pool_stats& stats() const noexcept { return stats_; }

  /// Blocks of `tokens` tokens: ceil(tokens / block_size).
  [[nodiscard]] std::size_t blocks_for(std::size_t tokens) const noexcept {
    return (tokens + block_size_ - 1) / block_size_;
  }

  /// The cached blocks that hold a prefix of `tokens`: whole blocks, at most `max_tokens`
  /// tokens, appended to `out` in order. Takes no reference (acquire does). Without prefix
  /// caching, finds nothing. Counts a query in stats().
  SERVEKIT_DECL std::size_t match_prefix(std::span<const token_id> tokens, std::size_t max_tokens,
                                         std::vector<kv_block_id>& out);

  /// How many of `blocks` nobody references (acquiring them takes them out of free_blocks()).
  [[nodiscard]] SERVEKIT_DECL std::uint32_t count_free(std::span<const kv_block_id> blocks) const;

  /// A reference on each of `blocks` (prefix hits); a free one leaves the free queue.
  SERVEKIT_DECL void acquire(std::span<const kv_block_id> blocks);

  /// `n` blocks with one reference each, appended to `out`, the least recently freed first
  /// (evicting their cached keys); false, taking nothing, when fewer than `n` are free.
  SERVEKIT_DECL bool allocate(std::size_t n, std::vector<kv_block_id>& out);

  /// Drops a reference on each of `blocks`, the last first: a sequence's tail, the least likely
  /// to be shared, is evicted before its head.
  SERVEKIT_DECL void release(std::span<const kv_block_id> blocks);

  /// Gives keys to the full blocks of a sequence whose block table is `blocks` (block i holds
  /// tokens [i·block_size, (i+1)·block_size) of `tokens`), from block `cached` on; returns how
  /// many of its blocks now have keys (the caller passes it back next time). A block whose key
  /// another block already holds stays uncached. Without prefix caching, returns `cached`.
  SERVEKIT_DECL std::size_t cache_full_blocks(std::span<const token_id> tokens,
                                              std::span<const kv_block_id> blocks,
                                              std::size_t cached);

private:
  static constexpr kv_block_id none = ~kv_block_id{0};
  struct block {
    std::uint32_t refs = 0;
    bool keyed = false;    // owns `key` in cache_ (a block another block's key duplicates does not)
    bool chained = false;  // `key` is its prefix's hash (full, and cache_full_blocks saw it)
    std::uint64_t key = 0; // its prefix's hash (when chained)
    std::uint64_t parent_key = 0; // the key its parent had (when chained), to verify hits
    kv_block_id prev = none;      // the free queue (when refs == 0)
    kv_block_id next = none;
  };

  [[nodiscard]] SERVEKIT_DECL std::uint64_t key_of(std::uint64_t parent_key,
                                                   std::span<const token_id> tokens) const noexcept;
  [[nodiscard]] SERVEKIT_DECL bool holds(kv_block_id b, std::uint64_t parent_key,
                                         std::span<const token_id> tokens) const noexcept;
  SERVEKIT_DECL void unlink(kv_block_id b) noexcept;
  SERVEKIT_DECL void push_back(kv_block_id b) noexcept;
  SERVEKIT_DECL void drop_key(kv_block_id b);

  std::uint32_t block_size_;
  bool prefix_caching_;
  std::vector<block> blocks_;
  std::vector<token_id> tokens_; // block_size tokens per keyed block (prefix caching only)
  std::unordered_map<std::uint64_t, kv_block_id> cache_;
  kv_block_id head_ = none; // the next to evict
  kv_block_id tail_ = none;
  std::uint32_t free_count_ = 0;
  kv_block_pool_stats stats_;
};

} // namespace servekit

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/schedule/impl/kv_block_pool.ipp>
#endif
