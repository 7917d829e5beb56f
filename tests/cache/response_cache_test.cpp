// The response cache on its own: `--cache-config` parsing, keys (only byte-identical requests
// share one), LRU eviction under the byte bound, hash collisions, and concurrent use.
#include <servekit/cache.hpp>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace response_cache_test {

using servekit::cache_key;
using servekit::data_type;
using servekit::response_cache;
using servekit::shape;
using servekit::tensor_list;

// ---------------------------------------------------------------------------- --cache-config

TEST(ParseCacheConfig, ReadsTritonsLocalSyntax) {
  const auto s = servekit::parse_cache_config("local,size=1048576");
  EXPECT_EQ(s.size_bytes, 1048576U);
  EXPECT_EQ(s.shards, 1U);
  const auto sharded = servekit::parse_cache_config("local,size=4096,shards=8");
  EXPECT_EQ(sharded.size_bytes, 4096U);
  EXPECT_EQ(sharded.shards, 8U);
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

std::string config_error_of(std::string_view text) {
  try {
    (void)servekit::parse_cache_config(text);
  } catch (const servekit::config_error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ParseCacheConfig, RefusesWhatItCannotRunNamingTheProblem) {
  EXPECT_PRED2(contains, config_error_of(""),
               std::string_view("expected '<implementation>,<key>=<value>"));
  EXPECT_PRED2(contains, config_error_of("redis,host=localhost"),
               std::string_view("unsupported cache implementation 'redis'"));
  EXPECT_PRED2(contains, config_error_of("local"), std::string_view("needs 'size=<bytes>'"));
  EXPECT_PRED2(contains, config_error_of("local,size=0"),
               std::string_view("'size' must be greater than 0"));
  EXPECT_PRED2(contains, config_error_of("local,size=12k"),
               std::string_view("'size' must be a non-negative integer"));
  EXPECT_PRED2(contains, config_error_of("local,size=-1"),
               std::string_view("'size' must be a non-negative integer"));
  EXPECT_PRED2(contains, config_error_of("local,size="),
               std::string_view("'size' must be a non-negative integer"));
  EXPECT_PRED2(contains, config_error_of("local,size=1,size=2"),
               std::string_view("'size' given twice"));
  EXPECT_PRED2(contains, config_error_of("local,size"),
               std::string_view("expected '<key>=<value>', got 'size'"));
  EXPECT_PRED2(contains, config_error_of("local,size=10,color=red"),
               std::string_view("unknown key 'color'"));
  EXPECT_PRED2(contains, config_error_of("local,size=10,shards=0"),
               std::string_view("'shards' must be at least 1"));
  // Every shard is made with the cache: their count is bounded, not an allocation of 2^64.
  EXPECT_PRED2(contains, config_error_of("local,size=10,shards=18446744073709551615"),
               std::string_view("'shards' must be at most 1024, got 18446744073709551615"));
  EXPECT_EQ(servekit::parse_cache_config("local,size=10,shards=1024").shards, 1024U);
  EXPECT_PRED2(contains, config_error_of("local,size=10,"),
               std::string_view("expected '<key>=<value>', got ''"));
  EXPECT_PRED2(contains, config_error_of("redis,host=x"),
               std::string_view("--cache-config 'redis,host=x'"));
}

// ---------------------------------------------------------------------------- keys

servekit::request request_of(std::vector<float> values, std::string input = "INPUT0") {
  servekit::request r;
  r.id = "r";
  r.inputs.push_back(servekit::make_tensor(std::move(input), data_type::fp32,
                                           shape{1, static_cast<std::int64_t>(values.size())},
                                           std::span<const float>{values}));
  return r;
}

cache_key key_of(const servekit::request& r, std::string_view model = "m",
                 std::int64_t version = 1) {
  return *cache_key::of(model, version, r);
}

TEST(CacheKey, OnlyByteIdenticalRequestsShareAKey) {
  const auto a = request_of({1, 2, 3, 4});
  EXPECT_EQ(key_of(a), key_of(request_of({1, 2, 3, 4})));
  EXPECT_NE(key_of(a), key_of(request_of({1, 2, 3, 5})));        // data
  EXPECT_NE(key_of(a), key_of(request_of({1, 2, 3, 4}, "IN1"))); // input name
  EXPECT_NE(key_of(a), key_of(a, "other"));                      // model
  EXPECT_NE(key_of(a), key_of(a, "m", 2));                       // version

  auto reshaped = request_of({1, 2, 3, 4});
  reshaped.inputs[0].shape = shape{2, 2}; // same bytes, other shape
  EXPECT_NE(key_of(a), key_of(reshaped));

  auto retyped = request_of({1, 2, 3, 4});
  retyped.inputs[0].type = data_type::int32; // same bytes, other type
  EXPECT_NE(key_of(a), key_of(retyped));

  auto some_outputs = request_of({1, 2, 3, 4});
  some_outputs.requested_outputs = {"OUTPUT0"};
  EXPECT_NE(key_of(a), key_of(some_outputs));
}

// Parameters reach the backend (max_tokens, temperature...), so they can change the outputs:
// their names, types, values and order are part of the key.
TEST(CacheKey, ParametersArePartOfTheKey) {
  const auto plain = request_of({1, 2, 3, 4});
  auto with = [](auto... set) {
    auto r = request_of({1, 2, 3, 4});
    (set(r.parameters), ...);
    return r;
  };
  const auto tokens = [](std::int64_t n) {
    return [n](servekit::parameter_list& p) { p.set("max_tokens", n); };
  };
  EXPECT_EQ(key_of(with(tokens(8))), key_of(with(tokens(8))));
  EXPECT_NE(key_of(plain), key_of(with(tokens(8))));
  EXPECT_NE(key_of(with(tokens(8))), key_of(with(tokens(9))));
  // Same name, other type: the int64 8 and the double 8.0 are different requests.
  EXPECT_NE(key_of(with(tokens(8))),
            key_of(with([](servekit::parameter_list& p) { p.set("max_tokens", 8.0); })));
  const auto text = [](std::string value) {
    return [value](servekit::parameter_list& p) { p.set("stop", value); };
  };
  EXPECT_NE(key_of(with(text("ab"))), key_of(with(text("abc"))));
  EXPECT_NE(key_of(with(tokens(8), text("x"))), key_of(with(text("x"), tokens(8)))); // order
}

TEST(CacheKey, IgnoresWhatDoesNotChangeTheOutputs) {
  auto other = request_of({1, 2, 3, 4});
  other.id = "another id";
  other.priority = 3;
  other.timeout_us = 100;
  EXPECT_EQ(key_of(request_of({1, 2, 3, 4})), key_of(other));
}

TEST(CacheKey, LengthPrefixesKeepPartsApart) {
  // "ab" + "c" and "a" + "bc" must not serialise alike.
  EXPECT_NE(key_of(request_of({1}, "ab"), "c"), key_of(request_of({1}, "abc"), ""));
}

void release_nothing(void*, std::byte*, std::size_t) noexcept {}

TEST(CacheKey, DeviceMemoryInputsAreNotCacheable) {
  std::array<std::byte, 16> bytes{};
  servekit::request r;
  r.inputs.push_back(servekit::tensor{"INPUT0", data_type::fp32, shape{1, 4},
                                      servekit::buffer::adopt(bytes.data(), bytes.size(),
                                                              servekit::memory_location::gpu(0),
                                                              &release_nothing, nullptr)});
  EXPECT_FALSE(cache_key::of("m", 1, r).has_value());
}

// ---------------------------------------------------------------------------- the cache

tensor_list outputs_of(float value, std::int64_t n = 4) {
  std::vector<float> v(static_cast<std::size_t>(n), value);
  tensor_list out;
  out.push_back(
      servekit::make_tensor("OUTPUT0", data_type::fp32, shape{1, n}, std::span<const float>{v}));
  return out;
}

float first_value(const tensor_list& outputs) { return outputs.at(0).values<float>()[0]; }

servekit::response_cache_settings settings(std::size_t size_bytes, std::size_t shards = 1) {
  servekit::response_cache_settings s;
  s.size_bytes = size_bytes;
  s.shards = shards;
  return s;
}

cache_key named(std::string text) { return cache_key{std::move(text)}; }

// Settings built in C++ are bounded as the flag is: the shards are made with the cache.
TEST(ResponseCache, RefusesMoreShardsThanItsBound) {
  EXPECT_THROW(response_cache{settings(4096, std::size_t{1} << 40U)}, servekit::config_error);
  EXPECT_NO_THROW(response_cache{settings(4096, servekit::response_cache_settings::max_shards)});
}

TEST(ResponseCache, ReturnsCopiesOfWhatWasInserted) {
  response_cache cache{settings(1 << 20)};
  EXPECT_FALSE(cache.lookup(named("a")).has_value());
  EXPECT_TRUE(cache.insert(named("a"), outputs_of(7)));
  auto hit = cache.lookup(named("a"));
  ASSERT_TRUE(hit.has_value());
  ASSERT_EQ(hit->size(), 1U);
  EXPECT_EQ((*hit)[0].name, "OUTPUT0");
  EXPECT_EQ((*hit)[0].shape, (shape{1, 4}));
  EXPECT_EQ(first_value(*hit), 7.0F);
  (*hit)[0].values<float>()[0] = 99; // the caller's copy, not the cache's
  EXPECT_EQ(first_value(*cache.lookup(named("a"))), 7.0F);

  const auto c = cache.counters();
  EXPECT_EQ(c.hits, 2U);
  EXPECT_EQ(c.misses, 1U);
  EXPECT_EQ(c.insertions, 1U);
  EXPECT_EQ(c.entries, 1U);
  EXPECT_EQ(c.bytes_in_use, response_cache::entry_bytes(named("a"), outputs_of(7)));
}

TEST(ResponseCache, EvictsTheLeastRecentlyUsedToStayUnderItsSize) {
  const std::size_t one = response_cache::entry_bytes(named("a"), outputs_of(0));
  response_cache cache{settings(3 * one + one / 2)}; // room for three entries
  ASSERT_TRUE(cache.insert(named("a"), outputs_of(1)));
  ASSERT_TRUE(cache.insert(named("b"), outputs_of(2)));
  ASSERT_TRUE(cache.insert(named("c"), outputs_of(3)));
  ASSERT_TRUE(cache.lookup(named("a")).has_value()); // a is now the most recently used
  ASSERT_TRUE(cache.insert(named("d"), outputs_of(4)));

  EXPECT_FALSE(cache.lookup(named("b")).has_value()); // the least recently used went
  EXPECT_TRUE(cache.lookup(named("a")).has_value());
  EXPECT_TRUE(cache.lookup(named("c")).has_value());
  EXPECT_TRUE(cache.lookup(named("d")).has_value());
  auto c = cache.counters();
  EXPECT_EQ(c.evictions, 1U);
  EXPECT_EQ(c.entries, 3U);
  EXPECT_LE(c.bytes_in_use, cache.capacity_bytes());

  // A larger entry evicts as many as it needs, oldest first (a, c and d were used in that order).
  const std::size_t big = response_cache::entry_bytes(
      named("e"), outputs_of(5, static_cast<std::int64_t>(4 + one / 4)));
  ASSERT_GT(big, one);
  ASSERT_LE(big, 2 * one);
  ASSERT_TRUE(cache.insert(named("e"), outputs_of(5, static_cast<std::int64_t>(4 + one / 4))));
  EXPECT_FALSE(cache.lookup(named("a")).has_value());
  EXPECT_FALSE(cache.lookup(named("c")).has_value());
  EXPECT_TRUE(cache.lookup(named("d")).has_value());
  EXPECT_TRUE(cache.lookup(named("e")).has_value());
  c = cache.counters();
  EXPECT_EQ(c.evictions, 3U);
  EXPECT_EQ(c.bytes_in_use, one + big);
}

TEST(ResponseCache, LeavesOutWhatCannotBeCached) {
  const std::size_t one = response_cache::entry_bytes(named("a"), outputs_of(0));
  response_cache cache{settings(one)};
  EXPECT_TRUE(cache.insert(named("a"), outputs_of(1)));
  // Larger than the whole cache: refused, and nothing evicted for it.
  EXPECT_FALSE(cache.insert(named("big"), outputs_of(2, 64)));
  EXPECT_TRUE(cache.lookup(named("a")).has_value());
  // Already cached: the first response stays.
  EXPECT_FALSE(cache.insert(named("a"), outputs_of(3)));
  EXPECT_EQ(first_value(*cache.lookup(named("a"))), 1.0F);
  // An output in device memory: Triton caches CPU outputs only.
  std::array<std::byte, 16> bytes{};
  tensor_list on_gpu;
  on_gpu.push_back(servekit::tensor{"OUTPUT0", data_type::fp32, shape{1, 4},
                                    servekit::buffer::adopt(bytes.data(), bytes.size(),
                                                            servekit::memory_location::gpu(0),
                                                            &release_nothing, nullptr)});
  response_cache roomy{settings(1 << 20)};
  EXPECT_FALSE(roomy.insert(named("g"), on_gpu));
  EXPECT_EQ(roomy.counters().entries, 0U);
}

TEST(ResponseCache, AHashMatchAloneIsNeverAHit) {
  response_cache cache{settings(1 << 20)};
  const std::uint64_t same_hash = 42;
  ASSERT_TRUE(cache.insert(cache_key{"first", same_hash}, outputs_of(1)));
  EXPECT_FALSE(cache.lookup(cache_key{"second", same_hash}).has_value());
  ASSERT_TRUE(cache.insert(cache_key{"second", same_hash}, outputs_of(2)));
  EXPECT_EQ(first_value(*cache.lookup(cache_key{"first", same_hash})), 1.0F);
  EXPECT_EQ(first_value(*cache.lookup(cache_key{"second", same_hash})), 2.0F);
}

TEST(ResponseCache, ARequestKeyFindsWhatItsCacheKeyInserted) {
  response_cache cache{settings(1 << 20)};
  const auto a = request_of({1, 2, 3, 4});
  const auto key = servekit::request_key::of("m", 1, a);
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->hash(), key_of(a).hash());
  EXPECT_EQ(key->size(), key_of(a).bytes().size());
  EXPECT_TRUE(key->matches(key_of(a).bytes()));
  EXPECT_FALSE(cache.lookup(*key).has_value());
  ASSERT_TRUE(cache.insert(key->materialize(), outputs_of(8)));
  EXPECT_EQ(
      first_value(*cache.lookup(*servekit::request_key::of("m", 1, request_of({1, 2, 3, 4})))),
      8.0F);
  // Same sizes, one byte apart (in the header, then in the data): misses.
  EXPECT_FALSE(cache.lookup(*servekit::request_key::of("n", 1, a)).has_value());
  EXPECT_FALSE(cache.lookup(*servekit::request_key::of("m", 1, request_of({1, 2, 3, 5}))));
  EXPECT_FALSE(key->matches(key_of(request_of({1, 2, 3, 5})).bytes()));
  EXPECT_FALSE(key->matches(key_of(a).bytes().substr(1)));
}

TEST(ResponseCache, ClearDropsEveryEntry) {
  response_cache cache{settings(1 << 20, 4)};
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(cache.insert(named("k" + std::to_string(i)), outputs_of(1)));
  }
  EXPECT_EQ(cache.counters().entries, 20U);
  cache.clear();
  EXPECT_EQ(cache.counters().entries, 0U);
  EXPECT_EQ(cache.counters().bytes_in_use, 0U);
  EXPECT_FALSE(cache.lookup(named("k3")).has_value());
}

TEST(ResponseCache, RefusesZeroShards) {
  EXPECT_THROW(response_cache(settings(10, 0)), servekit::config_error);
}

/// Many threads insert and look up overlapping keys in a cache too small for all of them: every
/// hit holds the value of its key, and the bound holds throughout.
void hammer(std::size_t shards) {
  const std::size_t one = response_cache::entry_bytes(named("k00"), outputs_of(0));
  response_cache cache{settings(16 * one * shards, shards)};
  constexpr int threads = 4;
  constexpr int rounds = 4000;
  std::atomic<int> wrong{0};
  std::atomic<bool> over{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        // A hot set of 8 keys that fits, and a cold stream of 64 that does not.
        const int k = i % 5 == 0 ? (i * 7 + t * 13) % 64 : (i + t) % 8;
        const std::string key = (k < 10 ? "k0" : "k") + std::to_string(k);
        if (auto hit = cache.lookup(named(key))) {
          if (first_value(*hit) != static_cast<float>(k)) {
            ++wrong;
          }
        } else {
          cache.insert(named(key), outputs_of(static_cast<float>(k)));
        }
        if (i % 256 == 0 && cache.counters().bytes_in_use > cache.capacity_bytes()) {
          over = true;
        }
      }
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  const auto c = cache.counters();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_FALSE(over.load());
  EXPECT_EQ(c.hits + c.misses, static_cast<std::uint64_t>(threads * rounds));
  EXPECT_GT(c.hits, 0U);
  EXPECT_GT(c.evictions, 0U);
  EXPECT_LE(c.bytes_in_use, cache.capacity_bytes());
}

TEST(ResponseCache, ConcurrentHitsAndMissesKeepValuesAndBound) { hammer(1); }
TEST(ResponseCache, ConcurrentHitsAndMissesSharded) { hammer(4); }

} // namespace response_cache_test
