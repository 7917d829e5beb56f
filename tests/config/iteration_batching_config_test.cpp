// read_iteration_batching: the iteration scheduler's knobs from a model's parameters, under
// vLLM's and TensorRT-LLM backend's names.
#include <servekit/schedule/iteration_batching_parameters.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace iteration_batching_config_test {

using servekit::config_error;
using servekit::iteration_queue_order;
using servekit::kv_capacity_policy;
using servekit::parameter_map;
using servekit::read_iteration_batching;

/// The path of the config_error reading `p` throws, or "" when it does not throw.
std::string error_path(const parameter_map& p) {
  try {
    (void)read_iteration_batching(p);
  } catch (const config_error& e) {
    return e.path();
  }
  return {};
}

TEST(IterationBatchingConfig, ReadsVllmNames) {
  const auto o = read_iteration_batching({{"max_num_seqs", "64"},
                                          {"max_num_batched_tokens", "4096"},
                                          {"enable_chunked_prefill", "false"},
                                          {"long_prefill_token_threshold", "512"},
                                          {"block_size", "32"},
                                          {"num_gpu_blocks", "1000"},
                                          {"enable_prefix_caching", "0"},
                                          {"max_model_len", "8192"},
                                          {"scheduling_policy", "priority"},
                                          {"ttft_target_ms", "200"},
                                          {"unrelated_backend_knob", "x"}});
  EXPECT_EQ(o.max_num_seqs, 64U);
  EXPECT_EQ(o.max_num_batched_tokens, 4096U);
  EXPECT_FALSE(o.enable_chunked_prefill);
  EXPECT_EQ(o.long_prefill_token_threshold, 512U);
  EXPECT_EQ(o.block_size, 32U);
  EXPECT_EQ(o.num_blocks, 1000U);
  EXPECT_FALSE(o.enable_prefix_caching);
  EXPECT_EQ(o.max_model_len, 8192U);
  EXPECT_EQ(o.order, iteration_queue_order::priority);
  EXPECT_EQ(o.ttft_target, std::chrono::milliseconds{200});
  EXPECT_EQ(o.capacity, kv_capacity_policy::max_utilization) << "the default";
}

TEST(IterationBatchingConfig, ReadsTensorrtLlmNames) {
  const auto o = read_iteration_batching({{"batch_scheduler_policy", "guaranteed_no_evict"},
                                          {"enable_chunked_context", "true"},
                                          {"enable_kv_cache_reuse", "false"},
                                          {"tokens_per_block", "64"},
                                          {"max_tokens_in_paged_kv_cache", "6400"}});
  EXPECT_EQ(o.capacity, kv_capacity_policy::guaranteed_no_evict);
  EXPECT_TRUE(o.enable_chunked_prefill);
  EXPECT_FALSE(o.enable_prefix_caching);
  EXPECT_EQ(o.block_size, 64U);
  EXPECT_EQ(o.num_blocks, 100U) << "6400 tokens in blocks of 64";
  EXPECT_EQ(read_iteration_batching({{"capacity_policy", "static_batch"}}).capacity,
            kv_capacity_policy::static_batch);
}

TEST(IterationBatchingConfig, KeepsTheDefaultsItIsGiven) {
  servekit::iteration_batching_options defaults;
  defaults.num_blocks = 77;
  defaults.order = iteration_queue_order::slo_aware;
  EXPECT_EQ(read_iteration_batching({}, defaults), defaults);
}

TEST(IterationBatchingConfig, RefusesWhatDoesNotParseAndNamesThatDisagree) {
  EXPECT_EQ(error_path({{"max_num_seqs", "-1"}}), "/parameters/max_num_seqs");
  EXPECT_EQ(error_path({{"max_num_seqs", ""}}), "/parameters/max_num_seqs");
  EXPECT_EQ(error_path({{"max_num_batched_tokens", "4294967296"}}),
            "/parameters/max_num_batched_tokens");
  EXPECT_EQ(error_path({{"enable_prefix_caching", "yes"}}), "/parameters/enable_prefix_caching");
  EXPECT_EQ(error_path({{"batch_scheduler_policy", "${batch_scheduler_policy}"}}),
            "/parameters/batch_scheduler_policy")
      << "an unfilled TensorRT-LLM template";
  EXPECT_EQ(error_path({{"scheduling_policy", "lifo"}}), "/parameters/scheduling_policy");
  EXPECT_EQ(error_path({{"enable_chunked_prefill", "true"}, {"enable_chunked_context", "false"}}),
            "/parameters/enable_chunked_context");
  EXPECT_EQ(error_path({{"num_gpu_blocks", "10"}, {"max_tokens_in_paged_kv_cache", "320"}}),
            "/parameters/max_tokens_in_paged_kv_cache")
      << "320 tokens are 20 blocks of 16";
  EXPECT_EQ(error_path({{"num_gpu_blocks", "20"}, {"max_tokens_in_paged_kv_cache", "320"}}), "");
  EXPECT_EQ(error_path({{"enable_chunked_prefill", "true"}, {"enable_chunked_context", "true"}}),
            "")
      << "two names that agree";
}

} // namespace iteration_batching_config_test
