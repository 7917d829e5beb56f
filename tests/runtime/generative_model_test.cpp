// model<Backend, iteration_batcher<>>: a generative backend served per step on real threads.
// hash_llm keeps its state in the KV blocks the scheduler assigns, so every test that compares
// the text with hash_llm_test::reference() checks that batching, chunked prefill, preemption
// and prefix hits left the output unchanged. Also: streaming, max_tokens and stream from inputs
// or parameters, refusals at submit, cancellation freeing blocks, a failing step, shutdown,
// statistics and the config rules.
#include "../archetypes/hash_llm.hpp"

#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace generative_model_test {

using hash_llm_test::hash_llm;
using hash_llm_test::hash_llm_gate;
using hash_llm_test::reference;
using servekit::data_type;
using servekit::shape;

using llm = servekit::model<hash_llm, servekit::iteration_batcher<>>;
using llm2 = servekit::model<hash_llm, servekit::iteration_batcher<>, servekit::instance_group<2>>;

static_assert(servekit::generative_backend<hash_llm>);
static_assert(servekit::servable<llm>);

servekit::model_options options(std::map<std::string, std::string> parameters = {}) {
  servekit::model_options o;
  o.name = "llm";
  for (auto& [k, v] : parameters) {
    o.parameters[k] = v;
  }
  return o;
}

servekit::request prompt(const std::string& text, std::optional<std::int64_t> max_tokens = {},
                         bool stream = false) {
  servekit::request r;
  r.id = text.substr(0, 8);
  r.inputs.push_back(servekit::make_tensor("text_input", shape{1}, {std::string_view{text}}));
  if (max_tokens) {
    r.parameters.set("max_tokens", *max_tokens);
  }
  if (stream) {
    r.parameters.set("stream", true);
  }
  return r;
}

std::string text_of(const servekit::response& r) {
  const auto* t = r.find_output("text_output");
  return t == nullptr ? std::string{"<none>"} : std::string{t->strings().front()};
}

/// Every response of one request, in order; ready once the final one came.
struct collector {
  std::mutex mutex;
  std::condition_variable done;
  std::vector<servekit::response> responses;
  int finals = 0;

  servekit::response_sink sink() {
    return [this](servekit::response&& r) {
      const std::lock_guard lock{mutex};
      finals += r.final ? 1 : 0;
      responses.push_back(std::move(r));
      done.notify_all();
    };
  }
  void wait() {
    std::unique_lock lock{mutex};
    done.wait(lock, [&] { return finals > 0; });
  }
  void wait_responses(std::size_t n) {
    std::unique_lock lock{mutex};
    done.wait(lock, [&] { return responses.size() >= n; });
  }
  std::string text() {
    std::string s;
    for (const auto& r : responses) {
      if (r.ok()) {
        s += text_of(r);
      }
    }
    return s;
  }
};

TEST(generative_model, one_final_response_with_the_text_and_its_finish_reason) {
  llm m{options()};
  auto f = m.infer(prompt("Hello, world", 12));
  const auto r = f.get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_TRUE(r.final);
  EXPECT_EQ(r.id, "Hello, w");
  EXPECT_EQ(text_of(r), reference("Hello, world", 12, false));
  EXPECT_EQ(r.parameters.get<std::string_view>("finish_reason"), "length");
}

TEST(generative_model, streams_one_response_per_token_the_last_final) {
  llm m{options()};
  collector c;
  ASSERT_TRUE(m.submit(prompt("stream me", 7, true), c.sink()).ok());
  c.wait();
  ASSERT_EQ(c.responses.size(), 7U);
  for (std::size_t i = 0; i < c.responses.size(); ++i) {
    EXPECT_EQ(c.responses[i].final, i + 1 == c.responses.size());
    EXPECT_EQ(text_of(c.responses[i]).size(), 1U);
  }
  EXPECT_EQ(c.text(), reference("stream me", 7, false));
  EXPECT_EQ(c.finals, 1);
}

TEST(generative_model, stream_and_max_tokens_as_inputs_and_the_end_token) {
  llm m{options({{"end_token", "true"}})};
  auto r = prompt("inputs");
  r.inputs.push_back(servekit::make_tensor("max_tokens", shape{1}, {std::int32_t{40}}));
  r.inputs.push_back(servekit::make_tensor("stream", shape{1}, {true}));
  collector c;
  ASSERT_TRUE(m.submit(std::move(r), c.sink()).ok());
  c.wait();
  const auto want = reference("inputs", 40, true);
  EXPECT_EQ(c.text(), want);
  EXPECT_EQ(c.responses.size(), want.size());
  const auto reason = c.responses.back().parameters.get<std::string_view>("finish_reason");
  EXPECT_EQ(reason, want.back() == '.' ? "stop" : "length");
}

TEST(generative_model, the_model_default_max_tokens) {
  llm m{options({{"default_max_tokens", "5"}})};
  const auto r = m.infer(prompt("defaults")).get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(text_of(r), reference("defaults", 5, false));
}

TEST(generative_model, infer_sync_returns_the_last_tokens_response) {
  llm m{options({{"default_max_tokens", "5"}})};
  const auto r = m.infer_sync(prompt("defaults"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(text_of(r), reference("defaults", 5, false));
}

TEST(generative_model, bad_requests_are_refused_at_submit_naming_what_is_wrong) {
  llm m{options({{"max_model_len", "64"}, {"num_gpu_blocks", "8"}, {"block_size", "8"}})};
  collector c;
  auto refused = [&](servekit::request r, const std::string& needle) {
    const auto s = m.submit(std::move(r), c.sink());
    EXPECT_EQ(s.code(), servekit::status_code::invalid_argument) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  refused(prompt("zero", 0), "max_tokens must be at least 1");
  auto wrong_type = prompt("typed");
  wrong_type.parameters.set("max_tokens", std::string{"many"});
  refused(std::move(wrong_type), "max_tokens");
  refused(prompt(std::string(64, 'x'), 4), "max_model_len");
  refused(prompt("", 4), "empty");
  servekit::request none;
  refused(std::move(none), "text_input");
  EXPECT_TRUE(c.responses.empty()); // a refusal is the answer: nothing through the sink
}

/// Many concurrent prompts (shared prefixes, varied lengths) through a small KV cache, under
/// every capacity policy and queue order, on one and two instances: every text is the one the
/// model generates alone.
TEST(generative_model, every_policy_generates_what_the_model_generates_alone) {
  for (const auto capacity : servekit::kv_capacity_policies) {
    for (const auto order : servekit::iteration_queue_orders) {
      for (const bool two : {false, true}) {
        const std::map<std::string, std::string> p{
            {"batch_scheduler_policy", std::string{to_string(capacity)}},
            {"scheduling_policy", std::string{to_string(order)}},
            {"num_gpu_blocks", "24"},
            {"block_size", "4"},
            {"max_num_seqs", "6"},
            {"max_num_batched_tokens", "16"},
            {"max_model_len", "90"},
            {"end_token", "true"}};
        std::unique_ptr<llm> one;
        std::unique_ptr<llm2> both;
        if (two) {
          both = std::make_unique<llm2>(options(p));
        } else {
          one = std::make_unique<llm>(options(p));
        }
        std::mt19937 rng{7};
        const std::string shared = "The same system prompt. ";
        std::vector<std::unique_ptr<collector>> cs;
        std::vector<std::string> prompts;
        for (int i = 0; i < 24; ++i) {
          std::string text = (i % 3 == 0 ? shared : std::string{}) + "prompt " + std::to_string(i) +
                             std::string(rng() % 20, 'z');
          const std::int64_t max = 1 + static_cast<std::int64_t>(rng() % 30);
          auto r = prompt(text, max, i % 2 == 0);
          r.priority = rng() % 3;
          cs.push_back(std::make_unique<collector>());
          prompts.push_back(text + "|" + std::to_string(max));
          const auto s = two ? both->submit(std::move(r), cs.back()->sink())
                             : one->submit(std::move(r), cs.back()->sink());
          ASSERT_TRUE(s.ok()) << s.message();
        }
        for (std::size_t i = 0; i < cs.size(); ++i) {
          cs[i]->wait();
          const auto bar = prompts[i].rfind('|');
          const auto text = prompts[i].substr(0, bar);
          const auto max = static_cast<std::uint32_t>(std::stoul(prompts[i].substr(bar + 1)));
          EXPECT_EQ(cs[i]->text(), reference(text, max, true, 90))
              << to_string(capacity) << " " << to_string(order) << (two ? " two" : " one")
              << " prompt " << i;
          EXPECT_EQ(cs[i]->finals, 1);
          EXPECT_TRUE(cs[i]->responses.back().ok());
        }
        const auto g = two ? both->generation() : one->generation();
        EXPECT_EQ(g.num_requests_running, 0U);
        EXPECT_EQ(g.num_requests_waiting, 0U);
      }
    }
  }
}

TEST(generative_model, cancellation_answers_cancelled_and_frees_the_blocks) {
  hash_llm_gate gate;
  gate.allow(3);
  llm m{options({{"step_gate", std::to_string(reinterpret_cast<std::uintptr_t>(&gate))},
                 {"num_gpu_blocks", "32"},
                 {"block_size", "4"}})};
  collector c;
  servekit::cancellation_source source;
  auto r = prompt("a long generation", 100, true);
  r.cancellation = source.token();
  ASSERT_TRUE(m.submit(std::move(r), c.sink()).ok());
  gate.wait_steps(4); // three steps ran; the fourth is in flight, held by the gate
  EXPECT_GT(m.generation().kv_cache_usage, 0.0);
  m.cancel(source);
  gate.allow(1 << 30);
  c.wait();
  // The step in flight finishes (its token is sent), then the cancellation takes effect.
  ASSERT_EQ(c.responses.size(), 5U);
  EXPECT_EQ(c.text(), reference("a long generation", 4, false));
  EXPECT_EQ(c.responses.back().status.code(), servekit::status_code::cancelled);
  EXPECT_EQ(c.finals, 1);
  // The blocks are free by the next step: the model serves the next request at once.
  const auto next = m.infer(prompt("after", 3)).get();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(text_of(next), reference("after", 3, false));
  EXPECT_EQ(m.generation().kv_cache_usage, 0.0);
  EXPECT_EQ(m.statistics().failed_by(servekit::failure_reason::canceled), 1U);
}

TEST(generative_model, a_failing_step_fails_its_sequences_and_the_instance_goes_on) {
  llm m{options()};
  const auto bad = m.infer(prompt("please THROW here", 5)).get();
  EXPECT_EQ(bad.status.code(), servekit::status_code::internal);
  EXPECT_NE(bad.status.message().find("model 'llm'"), std::string::npos) << bad.status.message();
  EXPECT_NE(bad.status.message().find("injected fault"), std::string::npos);
  const auto good = m.infer(prompt("fine", 4)).get();
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(text_of(good), reference("fine", 4, false));
  EXPECT_EQ(m.generation().kv_cache_usage, 0.0);
}

TEST(generative_model, shutdown_cancel_answers_everything_once_and_drain_finishes_it) {
  for (const auto mode : {servekit::shutdown_mode::cancel, servekit::shutdown_mode::drain}) {
    llm m{options({{"max_num_seqs", "2"}})};
    std::vector<std::unique_ptr<collector>> cs;
    for (int i = 0; i < 6; ++i) {
      cs.push_back(std::make_unique<collector>());
      ASSERT_TRUE(
          m.submit(prompt("shut " + std::to_string(i), 200, i % 2 == 0), cs.back()->sink()).ok());
    }
    m.shutdown(mode);
    for (int i = 0; i < 6; ++i) {
      auto& c = *cs[static_cast<std::size_t>(i)];
      EXPECT_EQ(c.finals, 1);
      if (mode == servekit::shutdown_mode::drain) {
        EXPECT_EQ(c.text(), reference("shut " + std::to_string(i), 200, false));
      }
    }
    const auto refused = m.submit(prompt("late", 2), cs.front()->sink());
    EXPECT_EQ(refused.code(), servekit::status_code::unavailable);
  }
}

TEST(generative_model, statistics_and_generation_figures) {
  llm m{options({{"num_gpu_blocks", "50"}, {"block_size", "8"}})};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(m.infer(prompt("count " + std::to_string(i), 4, true)).get().ok());
  }
  const auto s = m.statistics();
  EXPECT_EQ(s.inference_count, 3U);
  EXPECT_EQ(s.success.count, 3U);
  EXPECT_EQ(s.pending_request_count, 0U);
  ASSERT_NE(s.batch_size(1), nullptr); // each step finished one sequence
  EXPECT_EQ(s.batch_size(1)->compute_infer.count, 3U);
  ASSERT_TRUE(s.generation.has_value());
  const auto& g = *s.generation;
  EXPECT_EQ(g.block_size, 8U);
  EXPECT_EQ(g.num_blocks, 50U);
  EXPECT_EQ(g.generation_tokens, 12U);
  EXPECT_EQ(g.prompt_tokens, 21U);
  EXPECT_EQ(g.time_to_first_token.count, 3U);
  EXPECT_EQ(g.time_per_output_token.count, 9U);
  EXPECT_GE(g.steps, 4U);
}

TEST(generative_model, config_rules) {
  // The knobs are read from parameters and checked when the model is built.
  EXPECT_THROW(llm{options({{"max_num_seqs", "0"}})}, servekit::config_error);
  EXPECT_THROW(llm{options({{"batch_scheduler_policy", "sometimes"}})}, servekit::config_error);
  auto dynamic = options();
  dynamic.dynamic_batching = servekit::dynamic_batching_options{};
  EXPECT_THROW(llm{dynamic}, servekit::config_error);
  auto sequence = options();
  sequence.sequence_batching = servekit::sequence_batching_options{};
  EXPECT_THROW(llm{sequence}, servekit::config_error);
  auto iterative = options({{"num_gpu_blocks", "10"}});
  iterative.sequence_batching = servekit::sequence_batching_options{};
  iterative.sequence_batching->iterative_sequence = true;
  llm m{iterative};
  EXPECT_EQ(m.iteration_options().num_blocks, 10U);
  // Without num_gpu_blocks the backend's cache size is used.
  llm sized{options()};
  EXPECT_EQ(sized.iteration_options().num_blocks, 64U);
  servekit::model_options shown = sized.options();
  sized.complete_options(shown);
  ASSERT_TRUE(shown.sequence_batching.has_value());
  EXPECT_TRUE(shown.sequence_batching->iterative_sequence);
  ASSERT_TRUE(shown.model_transaction_policy.has_value());
  EXPECT_TRUE(shown.model_transaction_policy->decoupled);
  EXPECT_EQ(shown.input.size(), 3U);
}

} // namespace generative_model_test
