// A model with `response_cache { enable: true }`: hits answer without executing, misses execute
// and fill the cache, only successful responses are kept, statistics (JSON and Prometheus)
// count hits and misses, decoupled and sequence models are refused, and concurrent clients
// see correct answers.
#include <servekit/cache.hpp>
#include <servekit/http/prometheus.hpp>
#include <servekit/http/statistics_json.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/schedule/sequence_batcher.hpp>
#include <servekit/state/host_state_store.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace response_cache_model_test {

using servekit::data_type;
using servekit::shape;

std::atomic<int> executions{0}; // NOLINT: test-only global, reset by each test

/// OUTPUT0 = INPUT0 * 2 (FP32 [4]); an input starting with a negative value fails.
struct doubler {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT0", data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT0", data_type::fp32, {4}}};

  explicit doubler(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    ++executions;
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("INPUT0");
      if (in.values<float>()[0] < 0) {
        b.response(i).status = servekit::invalid_argument("negative input");
        continue;
      }
      auto& out = b.response(i).add_output("OUTPUT0", data_type::fp32, in.shape);
      for (std::size_t k = 0; k < in.values<float>().size(); ++k) {
        out.values<float>()[k] = in.values<float>()[k] * 2;
      }
    }
  }
};

/// The same, declared decoupled.
struct decoupled_doubler : doubler {
  static constexpr bool decoupled = true;
  using doubler::doubler;
};

servekit::request make_request(float value, std::string id = "r") {
  servekit::request r;
  r.id = std::move(id);
  const std::vector<float> v(4, value);
  r.inputs.push_back(
      servekit::make_tensor("INPUT0", data_type::fp32, shape{1, 4}, std::span<const float>{v}));
  return r;
}

servekit::model_options cached_options(std::string name = "doubler", bool enable = true) {
  servekit::model_options o;
  o.name = std::move(name);
  o.dynamic_batching = servekit::dynamic_batching_options{};
  o.response_cache = servekit::response_cache_options{enable};
  return o;
}

std::shared_ptr<servekit::response_cache> make_cache(std::size_t bytes = 1 << 20) {
  servekit::response_cache_settings s;
  s.size_bytes = bytes;
  return std::make_shared<servekit::response_cache>(s);
}

servekit::model_environment with_cache(std::shared_ptr<servekit::response_cache> cache) {
  servekit::model_environment e;
  e.cache = std::move(cache);
  return e;
}

using doubler_model = servekit::model<doubler, servekit::dynamic_batcher<>>;

float first_output(const servekit::response& r) {
  return r.ok() && !r.outputs.empty() ? r.outputs[0].values<float>()[0] : -1;
}

class response_cache_model_test : public ::testing::Test {
protected:
  void SetUp() override { executions = 0; }
};

TEST_F(response_cache_model_test, AHitAnswersWithoutExecuting) {
  doubler_model m{cached_options(), {}, with_cache(make_cache())};
  const auto first = m.infer(make_request(3, "a")).get();
  ASSERT_TRUE(first.ok()) << first.status.message();
  EXPECT_EQ(first_output(first), 6.0F);
  EXPECT_EQ(executions.load(), 1);

  const auto second = m.infer(make_request(3, "b")).get();
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second.final);
  EXPECT_EQ(second.id, "b"); // the hit carries its own request's id
  EXPECT_EQ(first_output(second), 6.0F);
  ASSERT_EQ(second.outputs.size(), 1U);
  EXPECT_EQ(second.outputs[0].name, "OUTPUT0");
  EXPECT_EQ(second.outputs[0].shape, (shape{1, 4}));
  EXPECT_EQ(executions.load(), 1); // not executed

  const auto s = m.statistics();
  EXPECT_EQ(s.cache_hit.count, 1U);
  EXPECT_EQ(s.cache_miss.count, 1U);
  EXPECT_EQ(s.success.count, 2U);   // a hit is a success, as in Triton
  EXPECT_EQ(s.inference_count, 1U); // but not an inference
  EXPECT_EQ(s.execution_count, 1U); // nor an execution
  EXPECT_GT(s.cache_miss.ns, 0U);
}

TEST_F(response_cache_model_test, ByteDifferentInputsMiss) {
  doubler_model m{cached_options(), {}, with_cache(make_cache())};
  EXPECT_EQ(first_output(m.infer(make_request(1)).get()), 2.0F);
  EXPECT_EQ(first_output(m.infer(make_request(2)).get()), 4.0F);
  auto almost = make_request(1);
  almost.inputs[0].values<float>()[3] = 1.0001F; // one element differs
  EXPECT_EQ(m.infer(std::move(almost)).get().outputs[0].values<float>()[3], 2.0002F);
  EXPECT_EQ(executions.load(), 3);
  EXPECT_EQ(m.statistics().cache_miss.count, 3U);
  EXPECT_EQ(m.statistics().cache_hit.count, 0U);
}

TEST_F(response_cache_model_test, OnlySuccessfulResponsesAreCached) {
  doubler_model m{cached_options(), {}, with_cache(make_cache())};
  EXPECT_FALSE(m.infer(make_request(-1)).get().ok());
  EXPECT_FALSE(m.infer(make_request(-1)).get().ok());
  EXPECT_EQ(executions.load(), 2);
  EXPECT_EQ(m.statistics().cache_hit.count, 0U);
  EXPECT_EQ(m.statistics().cache_miss.count, 2U);
}

TEST_F(response_cache_model_test, NoCacheWithoutBothTheServerCacheAndTheModelSetting) {
  doubler_model no_server_cache{cached_options("a"), {}, {}};
  doubler_model not_enabled{cached_options("b", false), {}, with_cache(make_cache())};
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(first_output(no_server_cache.infer(make_request(5)).get()), 10.0F);
    EXPECT_EQ(first_output(not_enabled.infer(make_request(5)).get()), 10.0F);
  }
  EXPECT_EQ(executions.load(), 4);
  EXPECT_EQ(no_server_cache.statistics().cache_miss.count, 0U);
  EXPECT_EQ(not_enabled.statistics().cache_miss.count, 0U);
}

TEST_F(response_cache_model_test, ModelsSharingACacheDoNotShareEntries) {
  auto cache = make_cache();
  doubler_model a{cached_options("a"), {}, with_cache(cache)};
  doubler_model b{cached_options("b"), {}, with_cache(cache)};
  EXPECT_EQ(first_output(a.infer(make_request(1)).get()), 2.0F);
  EXPECT_EQ(first_output(b.infer(make_request(1)).get()), 2.0F); // same bytes, other model
  EXPECT_EQ(executions.load(), 2);
  EXPECT_EQ(first_output(b.infer(make_request(1)).get()), 2.0F);
  EXPECT_EQ(executions.load(), 2);
  EXPECT_EQ(cache->counters().entries, 2U);
}

TEST_F(response_cache_model_test, EvictedResponsesExecuteAgain) {
  // Room for one response: the second evicts the first.
  auto probe = make_request(1);
  const auto key = *servekit::cache_key::of("doubler", 1, probe);
  servekit::tensor_list out;
  out.push_back(servekit::make_tensor("OUTPUT0", data_type::fp32, shape{1, 4}));
  auto cache = make_cache(servekit::response_cache::entry_bytes(key, out) + 8);
  doubler_model m{cached_options(), {}, with_cache(cache)};
  (void)m.infer(make_request(1)).get();
  (void)m.infer(make_request(2)).get();
  EXPECT_EQ(first_output(m.infer(make_request(1)).get()), 2.0F);
  EXPECT_EQ(executions.load(), 3);
  EXPECT_EQ(cache->counters().evictions, 2U);
  EXPECT_EQ(first_output(m.infer(make_request(1)).get()), 2.0F);
  EXPECT_EQ(executions.load(), 3);
}

TEST_F(response_cache_model_test, RequestedOutputsArePartOfTheKey) {
  doubler_model m{cached_options(), {}, with_cache(make_cache())};
  (void)m.infer(make_request(1)).get();
  auto only = make_request(1);
  only.requested_outputs = {"OUTPUT0"};
  EXPECT_EQ(first_output(m.infer(std::move(only)).get()), 2.0F);
  EXPECT_EQ(executions.load(), 2);
}

TEST_F(response_cache_model_test, HitsAndMissesReachJsonAndPrometheus) {
  doubler_model m{cached_options(), {}, with_cache(make_cache())};
  for (int i = 0; i < 3; ++i) {
    (void)m.infer(make_request(1)).get();
  }
  const auto stats = m.statistics();
  const auto json = servekit::to_statistics_json("doubler", "1", stats);
  EXPECT_EQ(json["inference_stats"]["cache_hit"]["count"], 2);
  EXPECT_EQ(json["inference_stats"]["cache_miss"]["count"], 1);

  servekit::prometheus_writer w;
  w.add("doubler", std::int64_t{1}, stats);
  std::string text;
  w.write(text);
  EXPECT_NE(text.find("nv_cache_num_hits_per_model{model=\"doubler\",version=\"1\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("nv_cache_num_misses_per_model{model=\"doubler\",version=\"1\"} 1"),
            std::string::npos);
}

template <class Model>
std::string load_error(servekit::model_options o) {
  try {
    Model m{std::move(o), {}, with_cache(make_cache())};
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/response_cache/enable");
    return e.what();
  }
  return "no error";
}

TEST_F(response_cache_model_test, DecoupledModelsAreRefused) {
  auto o = cached_options("streamer");
  o.model_transaction_policy = servekit::model_transaction_policy_options{};
  o.model_transaction_policy->decoupled = true;
  using decoupled_model = servekit::model<decoupled_doubler, servekit::dynamic_batcher<>>;
  EXPECT_NE(load_error<decoupled_model>(o).find(
                "Response Cache does not currently support model streamer with 'decoupled' "
                "transaction policy"),
            std::string::npos);
  // Refused even when the server has no cache: the configuration is wrong either way.
  o.model_transaction_policy.reset();
  EXPECT_THROW((servekit::model<decoupled_doubler>{o}), servekit::config_error);
}

/// A backend for a sequence batcher (never constructed: the configuration is refused first).
struct sequence_backend {
  static constexpr std::int32_t max_batch_size = 4;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT", data_type::int32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT", data_type::int32, {1}}};
  explicit sequence_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

TEST_F(response_cache_model_test, SequenceModelsAreRefused) {
  auto o = cached_options("accumulate");
  o.dynamic_batching.reset();
  o.sequence_batching = servekit::sequence_batching_options{};
  using sequence_model =
      servekit::model<sequence_backend,
                      servekit::sequence_batcher<servekit::direct, servekit::host_state_store>>;
  EXPECT_NE(load_error<sequence_model>(o).find("Response Cache does not currently support model "
                                               "accumulate with sequence batching scheduler"),
            std::string::npos);
}

TEST_F(response_cache_model_test, ConcurrentClientsGetCorrectAnswers) {
  auto cache = make_cache();
  doubler_model m{cached_options(), {}, with_cache(cache)};
  constexpr int threads = 4;
  constexpr int per_thread = 200;
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const auto value = static_cast<float>((i + t) % 10);
        const auto r = m.infer(make_request(value)).get();
        if (first_output(r) != value * 2) {
          ++wrong;
        }
      }
    });
  }
  for (auto& c : clients) {
    c.join();
  }
  EXPECT_EQ(wrong.load(), 0);
  const auto s = m.statistics();
  EXPECT_EQ(s.cache_hit.count + s.cache_miss.count,
            static_cast<std::uint64_t>(threads * per_thread));
  EXPECT_EQ(s.success.count, static_cast<std::uint64_t>(threads * per_thread));
  // Ten distinct requests: executions only for misses, racing misses of one key included.
  EXPECT_EQ(static_cast<std::uint64_t>(executions.load()), s.execution_count);
  EXPECT_EQ(s.inference_count, s.cache_miss.count);
  EXPECT_GE(s.cache_hit.count, static_cast<std::uint64_t>(threads * per_thread - threads * 10));
  EXPECT_EQ(cache->counters().entries, 10U);
}

} // namespace response_cache_model_test
