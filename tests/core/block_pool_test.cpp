#include <servekit/core/detail/block_pool.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace block_pool_test {

using servekit::detail::block_pool;

TEST(block_pool, blocks_are_usable_and_aligned_for_any_scalar) {
  for (std::size_t size : {1U, 63U, 64U, 65U, 1000U, 4096U, 5000U}) {
    void* p = block_pool::allocate(size);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % __STDCPP_DEFAULT_NEW_ALIGNMENT__, 0U);
    std::memset(p, 0xAB, size);
    block_pool::release(p, size);
  }
}

TEST(block_pool, live_blocks_never_overlap) {
  std::vector<void*> live;
  std::set<void*> seen;
  for (int i = 0; i < 1000; ++i) {
    void* p = block_pool::allocate(100);
    EXPECT_TRUE(seen.insert(p).second) << "a live block was handed out twice";
    live.push_back(p);
  }
  for (void* p : live) {
    block_pool::release(p, 100);
  }
}

TEST(block_pool, blocks_freed_on_another_thread_come_back) {
  // The pattern of a model: one thread allocates, another frees; then the first reuses.
  std::vector<void*> made;
  for (int i = 0; i < 600; ++i) {
    made.push_back(block_pool::allocate(200));
  }
  std::thread freer{[&] {
    for (void* p : made) {
      block_pool::release(p, 200);
    }
  }};
  freer.join(); // its cache handed its blocks to the shared stack when it exited
  const std::set<void*> before(made.begin(), made.end());
  int reused = 0;
  std::vector<void*> again;
  for (int i = 0; i < 600; ++i) {
    void* p = block_pool::allocate(200);
    reused += before.count(p) != 0 ? 1 : 0;
    again.push_back(p);
  }
  for (void* p : again) {
    block_pool::release(p, 200);
  }
#ifdef SERVEKIT_DETAIL_POOL_DISABLED
  GTEST_SKIP() << "the pool steps aside under AddressSanitizer";
#else
  EXPECT_GT(reused, 500);
#endif
}

TEST(block_pool, concurrent_allocate_and_release_keep_blocks_distinct) {
  constexpr int rounds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      std::vector<unsigned char*> mine;
      for (int i = 0; i < rounds; ++i) {
        auto* p = static_cast<unsigned char*>(block_pool::allocate(64));
        *p = static_cast<unsigned char>(t);
        mine.push_back(p);
        if (mine.size() > 32) {
          for (auto* q : mine) {
            ASSERT_EQ(*q, static_cast<unsigned char>(t)) << "a block was shared by two threads";
            block_pool::release(q, 64);
          }
          mine.clear();
        }
      }
      for (auto* q : mine) {
        block_pool::release(q, 64);
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
}

} // namespace block_pool_test
