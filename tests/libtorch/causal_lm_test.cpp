// servekit::libtorch::causal_lm under the iteration batcher: the TorchScript transformer tiny_lm
// (make_models.cpp), its KV cache paged in the scheduler's blocks, generates exactly the tokens
// of reference_models::tiny_lm (plain C++, the whole sequence recomputed per token, no cache)
// under every capacity policy, with chunked prefill, preemption and prefix-cache hits; through
// a repository as `backend: "causal_lm"`; and the model file's checks.
#include "libtorch_test_support.hpp"
#include "reference_models.hpp"

#include <servekit/libtorch/causal_lm.hpp>
#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace causal_lm_test {

using libtorch_tests::test_models;
using servekit::shape;

using llm = servekit::model<servekit::libtorch::causal_lm, servekit::iteration_batcher<>>;

const reference_models::tiny_lm& reference_model() {
  static const auto m = reference_models::tiny_lm::seeded();
  return m;
}

/// What the reference generates after `prompt`.
std::string expected(const std::string& prompt, std::size_t count) {
  const std::vector<std::int32_t> tokens(prompt.begin(), prompt.end());
  const auto out = reference_model().generate(tokens, count);
  return {out.begin(), out.end()};
}

servekit::model_options options(std::map<std::string, std::string> parameters) {
  servekit::model_options o;
  o.name = "tiny_lm";
  o.directory = test_models.string();
  o.default_model_filename = "tiny_lm.pt";
  o.parameters["INTRA_OP_THREAD_COUNT"] = "1";
  for (auto& [k, v] : parameters) {
    o.parameters[k] = v;
  }
  return o;
}

servekit::request prompt(const std::string& text, std::int64_t max_tokens, bool stream = false) {
  servekit::request r;
  r.id = text;
  r.inputs.push_back(servekit::make_tensor("text_input", shape{1}, {std::string_view{text}}));
  r.parameters.set("max_tokens", max_tokens);
  r.parameters.set("stream", stream);
  return r;
}

std::string text_of(const servekit::response& r) {
  const auto* t = r.find_output("text_output");
  return t == nullptr ? std::string{} : std::string{t->strings().front()};
}

TEST(causal_lm, generates_the_reference_tokens_alone) {
  llm m{options({})};
  const auto r = m.infer(prompt("Hello", 24)).get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  const std::string text = text_of(r);
  EXPECT_EQ(text, expected("Hello", 24));
  for (const char c : text) { // the output mask: printable ASCII or newline
    EXPECT_TRUE(c == '\n' || (c >= 32 && c < 127)) << static_cast<int>(c);
  }
}

/// Prompts with shared prefixes through a cache too small for all of them at once and a step
/// budget smaller than a prompt: chunked prefill, preemption (max_utilization), prefix hits and
/// batching, under every capacity policy; every text is the reference's.
TEST(causal_lm, identical_tokens_with_batching_chunking_preemption_and_prefix_hits) {
  const std::string shared = "You are a helpful assistant. Answer briefly. ";
  std::vector<std::pair<std::string, std::int64_t>> prompts;
  for (int i = 0; i < 10; ++i) {
    prompts.emplace_back((i % 2 == 0 ? shared : std::string{}) + "Question " + std::to_string(i) +
                             "?",
                         6 + 3 * (i % 4));
  }
  std::vector<std::string> want;
  for (const auto& [text, n] : prompts) {
    want.push_back(expected(text, static_cast<std::size_t>(n)));
  }
  for (const auto capacity : servekit::kv_capacity_policies) {
    llm m{options({{"batch_scheduler_policy", std::string{to_string(capacity)}},
                   {"num_gpu_blocks", "20"},
                   {"block_size", "4"},
                   {"max_num_seqs", "6"},
                   {"max_num_batched_tokens", "24"},
                   {"max_model_len", "80"}})};
    std::vector<std::future<servekit::response>> futures;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      futures.push_back(m.infer(prompt(prompts[i].first, prompts[i].second, i % 3 == 0)));
    }
    for (std::size_t i = 0; i < futures.size(); ++i) {
      const auto r = futures[i].get();
      ASSERT_TRUE(r.ok()) << r.status.message();
      if (i % 3 != 0) { // streaming requests' final response holds the last token only
        EXPECT_EQ(text_of(r), want[i]) << to_string(capacity) << " prompt " << i;
      } else {
        EXPECT_EQ(text_of(r), want[i].substr(want[i].size() - 1)) << to_string(capacity);
      }
    }
    const auto g = m.generation();
    if (capacity == servekit::kv_capacity_policy::max_utilization) {
      EXPECT_GT(g.preemptions, 0U) << "the cache was meant to be too small";
    }
    EXPECT_GT(g.prefix_cache_hits, 0U);
    EXPECT_EQ(g.kv_cache_usage, 0.0);
  }
}

TEST(causal_lm, the_cache_size_from_megabytes_and_the_end_token) {
  // 2 layers x 16 tokens x 32 values x 2 (K and V) x 8 bytes = 16 KiB a block.
  llm m{options({{"kv_cache_megabytes", "1"}, {"end_token", "101"}})};
  EXPECT_EQ(m.iteration_options().num_blocks, 64U);
  const auto r = m.infer(prompt("The ", 60)).get();
  ASSERT_TRUE(r.ok());
  const auto full = expected("The ", 60);
  const auto e = full.find('e');
  EXPECT_EQ(text_of(r), e == std::string::npos ? full : full.substr(0, e + 1));
}

TEST(causal_lm, serves_from_a_repository_as_causal_lm) {
  libtorch_tests::torch_repository repo;
  repo.add("lm", R"(
backend: "causal_lm"
max_batch_size: 0
sequence_batching { iterative_sequence: true }
parameters { key: "num_gpu_blocks" value: { string_value: "64" } }
parameters { key: "max_model_len" value: { string_value: "256" } }
)",
           "tiny_lm");
  using backends =
      servekit::backend_list<servekit::named_backend<"causal_lm", servekit::libtorch::causal_lm>>;
  servekit::model_repository repository{repo.root(), backends{}};
  const auto index = repository.load_all();
  ASSERT_EQ(libtorch_tests::load_error(index, "lm"), "");
  const auto m = repository.find("lm");
  ASSERT_NE(m, nullptr);
  const auto r = libtorch_tests::infer(m->model(), prompt("Once upon a time", 16)).get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(text_of(r), expected("Once upon a time", 16));
}

TEST(causal_lm, a_model_file_without_step_fails_the_load_naming_it) {
  auto o = options({});
  o.default_model_filename = "classifier.pt";
  try {
    llm m{o};
    FAIL() << "loaded";
  } catch (const servekit::config_error& e) {
    EXPECT_NE(std::string{e.what()}.find("classifier.pt"), std::string::npos) << e.what();
    EXPECT_NE(std::string{e.what()}.find("vocab_size"), std::string::npos) << e.what();
  }
}

} // namespace causal_lm_test
