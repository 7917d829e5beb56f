#pragma once
// Timed steps of the bundled LibTorch transformer (examples/models/tiny_lm, served by
// servekit::libtorch::causal_lm): the plans an iteration_scheduler_core makes for a varying
// load, each executed on the backend and timed, so fit_step_model (step_model.hpp) can calibrate
// the step-time model on a real runtime. Needs servekit::libtorch.
#include "harness/step_model.hpp"

#include <servekit/backend/instance_context.hpp>
#include <servekit/libtorch/causal_lm.hpp>
#include <servekit/schedule/iteration_batching_parameters.hpp>
#include <servekit/schedule/iteration_scheduler_core.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace servekit_bench {

/// The scheduler knobs the timed steps (and the threaded runs) use for tiny_lm.
inline servekit::parameter_map tiny_lm_parameters() {
  return {
      {"INTRA_OP_THREAD_COUNT", "1"}, {"num_gpu_blocks", "4096"},        {"block_size", "16"},
      {"max_num_seqs", "64"},         {"max_num_batched_tokens", "512"}, {"max_model_len", "2048"}};
}

/// A prompt and an output length the timed steps draw from.
struct length_pair {
  std::uint32_t prompt = 0;
  std::uint32_t output = 0;
};

/// Runs `steps` steps of tiny_lm (model file in `version_folder`) under a load whose target
/// concurrency wanders between 1 and 48 sequences, each with a prompt and output length drawn
/// from `lengths` (empty: prompts of 8-600 tokens, 4-150 generated), and returns each step's
/// shape and time (the first `warmup` steps left out).
inline std::vector<step_sample> time_tiny_lm_steps(const std::filesystem::path& version_folder,
                                                   int steps,
                                                   const std::vector<length_pair>& lengths = {},
                                                   int warmup = 20, std::uint64_t seed = 11) {
  const servekit::parameter_map parameters = tiny_lm_parameters();
  const std::string directory = version_folder.string();
  servekit::model_context mc;
  mc.model_name = "tiny_lm";
  mc.directory = directory;
  mc.parameters = &parameters;
  servekit::libtorch::causal_lm_model model{mc};
  servekit::instance_context ic;
  ic.model_name = "tiny_lm";
  ic.instance_name = "tiny_lm_0";
  ic.parameters = &parameters;
  servekit::libtorch::causal_lm backend{ic, model};
  auto options = servekit::read_iteration_batching(parameters);
  servekit::iteration_scheduler_core core{options};

  std::mt19937_64 rng{seed};
  std::uniform_int_distribution<std::uint32_t> prompt_len{8, 600};
  std::uniform_int_distribution<std::uint32_t> output_len{4, 150};
  std::uint64_t next_id = 0;
  int target = 1;
  std::vector<step_sample> out;
  std::vector<servekit::step_output> sampled;
  std::vector<servekit::generation_event> events;
  for (int step = 0; step < steps + warmup; ++step) {
    if (step % 25 == 0) {
      target = 1 + static_cast<int>(rng() % 48);
    }
    while (static_cast<int>(core.num_running() + core.num_waiting()) < target) {
      servekit::generation_request g;
      g.id = next_id++;
      const length_pair pick = lengths.empty() ? length_pair{prompt_len(rng), output_len(rng)}
                                               : lengths[rng() % lengths.size()];
      g.prompt.resize(pick.prompt);
      for (auto& t : g.prompt) {
        t = static_cast<servekit::token_id>(32 + rng() % 95);
      }
      g.max_new_tokens = pick.output;
      if (!core.add(std::move(g)).ok()) {
        break;
      }
    }
    const servekit::step_plan& plan = core.schedule(servekit::time_point{});
    if (plan.empty()) {
      continue;
    }
    sampled.clear();
    const auto t0 = std::chrono::steady_clock::now();
    backend.execute_step(plan, sampled);
    const auto t1 = std::chrono::steady_clock::now();
    if (step >= warmup) {
      out.push_back({static_cast<double>(plan.scheduled_tokens),
                     static_cast<double>(plan.sequences.size()), step_model::context_tokens(plan),
                     std::chrono::duration<double, std::micro>(t1 - t0).count()});
    }
    events.clear();
    (void)core.update(sampled, events);
  }
  return out;
}

} // namespace servekit_bench
