#include <servekit/core/tensor.hpp>
#include <servekit/cuda/buffer_pool.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

namespace buffer_pool_policy_test {

using servekit::buffer;
using servekit::cuda::buffer_pool;
using servekit::cuda::host_allocator;
using servekit::cuda::pool_counters;

using host_pool = buffer_pool<host_allocator>;

static_assert(servekit::cuda::pool_allocator<host_allocator>);
static_assert(!servekit::cuda::pool_allocator<int>);

TEST(buffer_pool, a_steady_load_allocates_nothing_after_warm_up) {
  host_pool pool;
  // Warm-up: one "batch" holds three buffers of different sizes at once.
  const auto one_batch = [&pool] {
    std::vector<buffer> held;
    held.push_back(pool.acquire(4096));
    held.push_back(pool.acquire(4096));
    held.push_back(pool.acquire(100));
  };
  one_batch();
  const pool_counters warm = pool.counters();
  EXPECT_EQ(warm.allocations, 3U);
  EXPECT_EQ(warm.outstanding, 0U);

  for (int i = 0; i < 100; ++i) {
    one_batch();
  }
  const pool_counters after = pool.counters();
  EXPECT_EQ(after.allocations, warm.allocations);
  EXPECT_EQ(after.reuses, 300U);
  EXPECT_EQ(after.releases, 303U);
  EXPECT_EQ(after.outstanding, 0U);
  EXPECT_EQ(after.bytes_reserved, warm.bytes_reserved);
}

TEST(buffer_pool, buffers_have_the_requested_size_and_the_allocators_location) {
  host_pool pool;
  buffer b = pool.acquire(300);
  EXPECT_EQ(b.size(), 300U);
  EXPECT_EQ(b.location(), servekit::memory_location::cpu());
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % host_allocator::alignment, 0U);
  b.bytes()[299] = std::byte{7}; // the whole requested size is usable
  EXPECT_EQ(pool.counters().outstanding, 1U);
}

TEST(buffer_pool, sizes_round_up_to_power_of_two_classes_from_256_bytes) {
  EXPECT_EQ(host_pool::block_size(1), 256U);
  EXPECT_EQ(host_pool::block_size(256), 256U);
  EXPECT_EQ(host_pool::block_size(257), 512U);
  EXPECT_EQ(host_pool::block_size(512), 512U);
  EXPECT_EQ(host_pool::block_size(1000), 1024U);
  EXPECT_EQ(host_pool::block_size(std::size_t{1} << 30), std::size_t{1} << 30);

  host_pool pool;
  {
    const buffer b = pool.acquire(300);
    EXPECT_EQ(pool.counters().bytes_reserved, 512U);
  }
  {
    // Same class (257..512): the block comes back.
    const buffer b = pool.acquire(512);
    EXPECT_EQ(pool.counters().reuses, 1U);
  }
  {
    // Next class: a new block.
    const buffer b = pool.acquire(513);
    EXPECT_EQ(pool.counters().allocations, 2U);
    EXPECT_EQ(pool.counters().bytes_reserved, 512U + 1024U);
  }
  {
    // Smaller class: not served by a larger free block.
    const buffer b = pool.acquire(10);
    EXPECT_EQ(pool.counters().allocations, 3U);
  }
}

TEST(buffer_pool, a_released_block_is_reused_in_place) {
  host_pool pool;
  const std::byte* first = nullptr;
  {
    const buffer b = pool.acquire(1000);
    first = b.data();
  }
  const buffer again = pool.acquire(700);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(again.size(), 700U);
}

TEST(buffer_pool, buffers_may_be_released_on_another_thread) {
  host_pool pool;
  constexpr int rounds = 200;
  for (int i = 0; i < rounds; ++i) {
    buffer b = pool.acquire(2048);
    std::thread releaser{[moved = std::move(b)]() mutable { moved = buffer{}; }};
    releaser.join();
  }
  const pool_counters c = pool.counters();
  EXPECT_EQ(c.allocations, 1U);
  EXPECT_EQ(c.reuses, static_cast<std::size_t>(rounds - 1));
  EXPECT_EQ(c.releases, static_cast<std::size_t>(rounds));
  EXPECT_EQ(c.outstanding, 0U);
}

TEST(buffer_pool, concurrent_acquire_and_release_keep_the_counters_consistent) {
  host_pool pool;
  constexpr int threads = 4;
  constexpr int rounds = 500;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&pool] {
      for (int i = 0; i < rounds; ++i) {
        const buffer b = pool.acquire(static_cast<std::size_t>(256 + (i % 3) * 512));
      }
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  const pool_counters c = pool.counters();
  EXPECT_EQ(c.allocations + c.reuses, static_cast<std::size_t>(threads * rounds));
  EXPECT_EQ(c.releases, static_cast<std::size_t>(threads * rounds));
  EXPECT_EQ(c.outstanding, 0U);
  // At most one block per class per thread was ever live at once.
  EXPECT_LE(c.allocations, static_cast<std::size_t>(threads * 3));
}

TEST(buffer_pool, trim_frees_free_blocks_but_not_blocks_in_use) {
  host_pool pool;
  buffer kept = pool.acquire(256);
  { const buffer dropped = pool.acquire(4000); }
  EXPECT_EQ(pool.counters().bytes_reserved, 256U + 4096U);

  pool.trim();
  EXPECT_EQ(pool.counters().bytes_reserved, 256U);
  EXPECT_EQ(pool.counters().outstanding, 1U);

  { const buffer again = pool.acquire(4000); }
  EXPECT_EQ(pool.counters().allocations, 3U); // the trimmed class allocates again

  kept = buffer{};
  pool.trim();
  EXPECT_EQ(pool.counters().bytes_reserved, 0U);
}

TEST(buffer_pool, acquiring_zero_bytes_gives_an_empty_buffer_without_a_block) {
  host_pool pool;
  const buffer b = pool.acquire(0);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.location(), servekit::memory_location::cpu());
  EXPECT_EQ(pool.counters(), pool_counters{});
}

TEST(buffer_pool, buffers_can_move_into_tensors) {
  host_pool pool;
  {
    servekit::tensor t{"X", servekit::data_type::fp32, servekit::shape{2}, pool.acquire(8)};
    t.values<float>()[1] = 1.5F;
    servekit::tensor moved = std::move(t);
    EXPECT_EQ(moved.values<float>()[1], 1.5F);
    EXPECT_EQ(pool.counters().outstanding, 1U);
  }
  EXPECT_EQ(pool.counters().outstanding, 0U);
}

TEST(buffer_pool_death, destroying_a_pool_with_live_buffers_asserts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe"); // earlier cases ran threads
  EXPECT_DEATH(
      {
        buffer survivor;
        {
          host_pool pool;
          survivor = pool.acquire(64);
        }
      },
      "buffer_pool destroyed while its buffers live");
}

} // namespace buffer_pool_policy_test
