// kv_block_pool: reference counts, the free queue's eviction order, and prefix caching (keys
// chained to the parent block, hits verified against the stored tokens).
#include <servekit/schedule/kv_block_pool.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace kv_block_pool_test {

using servekit::kv_block_id;
using servekit::kv_block_pool;
using servekit::token_id;

std::vector<token_id> iota_tokens(std::size_t n, token_id first = 0) {
  std::vector<token_id> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(KvBlockPool, AllocatesAllOrNothingAndCountsUsage) {
  kv_block_pool pool{4, 16, false};
  EXPECT_EQ(pool.free_blocks(), 4U);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.0);
  std::vector<kv_block_id> a;
  ASSERT_TRUE(pool.allocate(3, a));
  EXPECT_EQ(a.size(), 3U);
  EXPECT_EQ(pool.free_blocks(), 1U);
  EXPECT_DOUBLE_EQ(pool.usage(), 0.75);
  std::vector<kv_block_id> b;
  EXPECT_FALSE(pool.allocate(2, b));
  EXPECT_TRUE(b.empty()) << "a refused allocation takes nothing";
  EXPECT_EQ(pool.free_blocks(), 1U);
  pool.release(a);
  EXPECT_EQ(pool.free_blocks(), 4U);
  for (const kv_block_id id : a) {
    EXPECT_EQ(pool.ref_count(id), 0U);
  }
  EXPECT_EQ(pool.blocks_for(0), 0U);
  EXPECT_EQ(pool.blocks_for(1), 1U);
  EXPECT_EQ(pool.blocks_for(16), 1U);
  EXPECT_EQ(pool.blocks_for(17), 2U);
}

TEST(KvBlockPool, FullBlocksAreFoundAgainAsAPrefix) {
  kv_block_pool pool{8, 4, true};
  const auto tokens = iota_tokens(10); // two full blocks and a partial one
  std::vector<kv_block_id> blocks;
  ASSERT_TRUE(pool.allocate(3, blocks));
  EXPECT_EQ(pool.cache_full_blocks(tokens, blocks, 0), 2U) << "the partial block gets no key";

  std::vector<kv_block_id> hits;
  EXPECT_EQ(pool.match_prefix(tokens, tokens.size(), hits), 2U);
  EXPECT_EQ(hits, (std::vector<kv_block_id>{blocks[0], blocks[1]}));
  // At most max_tokens: whole blocks only.
  hits.clear();
  EXPECT_EQ(pool.match_prefix(tokens, 7, hits), 1U);
  // A different first block: the second block's tokens alone do not match (keys chain).
  auto other = tokens;
  other[0] = 99;
  hits.clear();
  EXPECT_EQ(pool.match_prefix(other, other.size(), hits), 0U);
  EXPECT_EQ(pool.stats().prefix_queries, 3U);
  EXPECT_EQ(pool.stats().prefix_query_tokens, 8U + 4U + 8U);
  EXPECT_EQ(pool.stats().prefix_hit_tokens, 8U + 4U);
  EXPECT_DOUBLE_EQ(pool.stats().hit_rate(), 12.0 / 20.0);
}

TEST(KvBlockPool, CachedBlocksStayFindableWhenFreeUntilEvicted) {
  kv_block_pool pool{3, 2, true};
  const auto tokens = iota_tokens(4);
  std::vector<kv_block_id> blocks;
  ASSERT_TRUE(pool.allocate(2, blocks));
  pool.cache_full_blocks(tokens, blocks, 0);
  pool.release(blocks);
  EXPECT_EQ(pool.free_blocks(), 3U);

  std::vector<kv_block_id> hits;
  ASSERT_EQ(pool.match_prefix(tokens, 4, hits), 2U);
  EXPECT_EQ(pool.count_free(hits), 2U);
  pool.acquire(hits); // a hit takes the blocks out of the free queue
  EXPECT_EQ(pool.free_blocks(), 1U);
  EXPECT_EQ(pool.ref_count(hits[0]), 1U);
  pool.release(hits);

  // Allocating every block evicts them: the uncached block first, then the cached ones.
  std::vector<kv_block_id> all;
  ASSERT_TRUE(pool.allocate(1, all));
  EXPECT_NE(all[0], blocks[0]);
  EXPECT_NE(all[0], blocks[1]);
  EXPECT_EQ(pool.stats().evicted_blocks, 0U);
  ASSERT_TRUE(pool.allocate(2, all));
  EXPECT_EQ(pool.stats().evicted_blocks, 2U);
  hits.clear();
  EXPECT_EQ(pool.match_prefix(tokens, 4, hits), 0U) << "an evicted block is not a hit";
}

TEST(KvBlockPool, EvictsTheLeastRecentlyFreedAndASequencesTailFirst) {
  kv_block_pool pool{4, 1, true};
  const std::vector<token_id> first{1, 2};
  const std::vector<token_id> second{3, 4};
  std::vector<kv_block_id> a;
  std::vector<kv_block_id> b;
  ASSERT_TRUE(pool.allocate(2, a));
  ASSERT_TRUE(pool.allocate(2, b));
  pool.cache_full_blocks(first, a, 0);
  pool.cache_full_blocks(second, b, 0);
  pool.release(a); // freed first: evicted first, its tail (a[1]) before its head (a[0])
  pool.release(b);
  std::vector<kv_block_id> got;
  ASSERT_TRUE(pool.allocate(1, got));
  EXPECT_EQ(got[0], a[1]);
  std::vector<kv_block_id> hits;
  EXPECT_EQ(pool.match_prefix(first, 2, hits), 1U) << "the head of `first` is still cached";
  ASSERT_TRUE(pool.allocate(1, got));
  EXPECT_EQ(got[1], a[0]);
  hits.clear();
  EXPECT_EQ(pool.match_prefix(second, 2, hits), 2U) << "`second` was freed later";
}

TEST(KvBlockPool, ADuplicatePrefixKeepsOneOwnerAndSharedBlocksCountOnce) {
  kv_block_pool pool{6, 2, true};
  const auto tokens = iota_tokens(4);
  std::vector<kv_block_id> a;
  std::vector<kv_block_id> b;
  ASSERT_TRUE(pool.allocate(2, a));
  ASSERT_TRUE(pool.allocate(2, b));
  pool.cache_full_blocks(tokens, a, 0);
  pool.cache_full_blocks(tokens, b, 0); // computed the same prefix: b's blocks stay unkeyed
  std::vector<kv_block_id> hits;
  ASSERT_EQ(pool.match_prefix(tokens, 4, hits), 2U);
  EXPECT_EQ(hits, a);
  pool.acquire(hits); // a third sequence shares a's blocks
  EXPECT_EQ(pool.ref_count(a[0]), 2U);
  EXPECT_EQ(pool.free_blocks(), 2U);
  // b's blocks hold chain keys although they own no cache entry: b goes on from them, and its
  // next block (a new prefix) is cached.
  std::vector<kv_block_id> b_next;
  ASSERT_TRUE(pool.allocate(1, b_next));
  b.push_back(b_next[0]);
  const auto longer = iota_tokens(6);
  EXPECT_EQ(pool.cache_full_blocks(longer, b, 2), 3U);
  hits.clear();
  ASSERT_EQ(pool.match_prefix(longer, 6, hits), 3U);
  EXPECT_EQ(hits, (std::vector<kv_block_id>{a[0], a[1], b[2]}));
  hits.pop_back(); // the sharer holds a's two blocks only
  pool.release(a);
  EXPECT_EQ(pool.free_blocks(), 1U) << "still held by the sharer";
  pool.release(hits);
  pool.release(b);
  EXPECT_EQ(pool.free_blocks(), 6U);
}

TEST(KvBlockPool, WithoutPrefixCachingNothingIsFound) {
  kv_block_pool pool{4, 2, false};
  const auto tokens = iota_tokens(4);
  std::vector<kv_block_id> blocks;
  ASSERT_TRUE(pool.allocate(2, blocks));
  EXPECT_EQ(pool.cache_full_blocks(tokens, blocks, 0), 0U);
  std::vector<kv_block_id> hits;
  EXPECT_EQ(pool.match_prefix(tokens, 4, hits), 0U);
  EXPECT_EQ(pool.stats().prefix_query_tokens, 4U);
  EXPECT_EQ(pool.stats().prefix_hit_tokens, 0U);
}

} // namespace kv_block_pool_test
