#pragma once
/// \file
/// Definitions for servekit/schedule/kv_block_pool.hpp. Compiled once into servekit::servekit,
/// or included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/core/assert.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/schedule/kv_block_pool.hpp>

#include <algorithm>
#include <cstring>

namespace servekit {

SERVEKIT_DECL kv_block_pool::kv_block_pool(std::uint32_t num_blocks, std::uint32_t block_size,
                                           bool enable_prefix_caching)
    : block_size_{block_size}, prefix_caching_{enable_prefix_caching}, blocks_(num_blocks) {
  SERVEKIT_ASSERT(num_blocks > 0 && block_size > 0, "a KV pool needs blocks of at least a token");
  if (prefix_caching_) {
    tokens_.resize(std::size_t{num_blocks} * block_size);
    cache_.reserve(num_blocks);
  }
  for (kv_block_id b = 0; b < num_blocks; ++b) {
    push_back(b);
  }
}

SERVEKIT_DECL std::uint64_t kv_block_pool::key_of(std::uint64_t parent_key,
                                                  std::span<const token_id> tokens) const noexcept {
  // A 64-bit mix (splitmix64's finaliser) over the parent's key and each token: a key names the
  // whole prefix. Hits are verified (holds), so a collision costs a miss, never wrong KV.
  auto mix = [](std::uint64_t z) noexcept {
    z = (z ^ (z >> 30U)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27U)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31U);
  };
  std::uint64_t h = mix(parent_key + 0x9e3779b97f4a7c15ULL);
  for (const token_id t : tokens) {
    h = mix(h ^ static_cast<std::uint32_t>(t));
  }
  return h;
}

SERVEKIT_DECL bool kv_block_pool::holds(kv_block_id b, std::uint64_t parent_key,
                                        std::span<const token_id> tokens) const noexcept {
  const block& k = blocks_[b];
  return k.keyed && k.parent_key == parent_key &&
         std::equal(tokens.begin(), tokens.end(),
                    tokens_.begin() + static_cast<std::ptrdiff_t>(std::size_t{b} * block_size_));
}

SERVEKIT_DECL std::size_t kv_block_pool::match_prefix(std::span<const token_id> tokens,
                                                      std::size_t max_tokens,
                                                      std::vector<kv_block_id>& out) {
  const std::size_t full = std::min(tokens.size(), max_tokens) / block_size_;
  ++stats_.prefix_queries;
  stats_.prefix_query_tokens += full * block_size_;
  if (!prefix_caching_) {
    return 0;
  }
  std::uint64_t parent = 0;
  std::size_t found = 0;
  for (; found < full; ++found) {
    const auto chunk = tokens.subspan(found * block_size_, block_size_);
    const std::uint64_t key = key_of(parent, chunk);
    const auto it = cache_.find(key);
    if (it == cache_.end() || !holds(it->second, parent, chunk)) {
      break;
    }
    out.push_back(it->second);
    parent = key;
  }
  stats_.prefix_hit_tokens += found * block_size_;
  return found;
}

SERVEKIT_DECL std::uint32_t kv_block_pool::count_free(std::span<const kv_block_id> blocks) const {
  return static_cast<std::uint32_t>(std::count_if(
      blocks.begin(), blocks.end(), [&](kv_block_id b) { return blocks_[b].refs == 0; }));
}

SERVEKIT_DECL void kv_block_pool::acquire(std::span<const kv_block_id> blocks) {
  for (const kv_block_id b : blocks) {
    if (blocks_[b].refs++ == 0) {
      unlink(b);
    }
  }
}

SERVEKIT_DECL bool kv_block_pool::allocate(std::size_t n, std::vector<kv_block_id>& out) {
  if (n > free_count_) {
    return false;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const kv_block_id b = head_;
    unlink(b);
    if (blocks_[b].keyed) {
      drop_key(b);
      ++stats_.evicted_blocks;
    }
    blocks_[b].chained = false;
    blocks_[b].refs = 1;
    out.push_back(b);
  }
  stats_.allocated_blocks += n;
  return true;
}

SERVEKIT_DECL void kv_block_pool::release(std::span<const kv_block_id> blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    block& k = blocks_[*it];
    SERVEKIT_ASSERT(k.refs > 0, "kv_block_pool::release of a block nobody holds");
    if (--k.refs == 0) {
      // An uncached block is worth nothing once free: it goes first in the eviction order.
      if (k.keyed) {
        push_back(*it);
      } else {
        k.next = head_;
        k.prev = none;
        (head_ == none ? tail_ : blocks_[head_].prev) = *it;
        head_ = *it;
        ++free_count_;
      }
    }
  }
}

SERVEKIT_DECL std::size_t kv_block_pool::cache_full_blocks(std::span<const token_id> tokens,
                                                           std::span<const kv_block_id> blocks,
                                                           std::size_t cached) {
  if (!prefix_caching_) {
    return cached;
  }
  const std::size_t full = std::min(tokens.size() / block_size_, blocks.size());
  // Every full block keeps its chain key, owner of the cache entry or not: the next call goes on
  // from the last one instead of hashing the sequence again (a duplicated prefix would
  // otherwise cost O(length) a step).
  std::uint64_t parent = 0;
  if (cached > 0) {
    const block& last = blocks_[blocks[cached - 1]];
    SERVEKIT_ASSERT(last.chained,
                    "kv_block_pool::cache_full_blocks: the first `cached` blocks have no keys");
    parent = last.key;
  }
  for (std::size_t i = cached; i < full; ++i) {
    const auto chunk = tokens.subspan(i * block_size_, block_size_);
    const std::uint64_t key = key_of(parent, chunk);
    block& k = blocks_[blocks[i]];
    if (!k.chained) {
      k.chained = true;
      k.key = key;
      k.parent_key = parent;
      if (cache_.try_emplace(key, blocks[i]).second) {
        k.keyed = true;
        std::memcpy(&tokens_[std::size_t{blocks[i]} * block_size_], chunk.data(),
                    block_size_ * sizeof(token_id));
      }
    }
    parent = key;
  }
  return std::max(cached, full);
}

SERVEKIT_DECL void kv_block_pool::unlink(kv_block_id b) noexcept {
  block& k = blocks_[b];
  (k.prev == none ? head_ : blocks_[k.prev].next) = k.next;
  (k.next == none ? tail_ : blocks_[k.next].prev) = k.prev;
  k.prev = k.next = none;
  --free_count_;
}

SERVEKIT_DECL void kv_block_pool::push_back(kv_block_id b) noexcept {
  block& k = blocks_[b];
  k.prev = tail_;
  k.next = none;
  (tail_ == none ? head_ : blocks_[tail_].next) = b;
  tail_ = b;
  ++free_count_;
}

SERVEKIT_DECL void kv_block_pool::drop_key(kv_block_id b) {
  block& k = blocks_[b];
  if (const auto it = cache_.find(k.key); it != cache_.end() && it->second == b) {
    cache_.erase(it);
  }
  k.keyed = false;
}

} // namespace servekit
