// examples/accumulate: Triton's implicit-state accumulator, under the sequence batcher.
//
// Loads model/config.json, then runs the same model under both strategies, direct and oldest:
// 4 client threads each interleave 8 sequences of 20 steps (uint64 correlation ids), and thread 0
// also sends one sequence with a string id. Every response must be the running sum of its
// sequence. Exits 1 if any is wrong or fails.
//
//     accumulate [model directory]
#include "accumulate_backend.hpp"

#include <servekit/config.hpp>
#include <servekit/core.hpp>
#include <servekit/runtime.hpp>
#include <servekit/schedule.hpp>
#include <servekit/state.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <latch>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifndef SERVEKIT_EXAMPLE_MODEL_DIR
#define SERVEKIT_EXAMPLE_MODEL_DIR "model"
#endif

namespace {

/// How many sequences ended, per servekit::sequence_end_reason (the hook runs on instance
/// threads, hence atomics).
std::array<std::atomic<int>, 4> ended_by_reason{};

/// The backend with the optional hook `sequence_ended`: a sequence left its slot (its END
/// executed, it idled out, was cancelled, or the model shut down). A backend that keeps
/// per-sequence resources frees them here; this one counts them.
struct counting_backend : accumulate::backend {
  using accumulate::backend::backend;

  void sequence_ended(const servekit::sequence_end& e) {
    ended_by_reason[static_cast<std::size_t>(e.reason)].fetch_add(1);
    if (e.reason != servekit::sequence_end_reason::end) {
      fmt::print("  sequence {} left slot {}: {}\n", e.id.to_string(), e.slot,
                 servekit::to_string(e.reason));
    }
  }
};

// The strategy is a type; its numbers (and the state, the controls) come from the config.
template <class Strategy>
using accumulate_model =
    servekit::model<counting_backend,
                    servekit::sequence_batcher<Strategy, servekit::host_state_store>,
                    servekit::instance_group<2>>;

constexpr int threads = 4;
constexpr int sequences_per_thread = 8;
constexpr int steps = 20;

servekit::request step(const servekit::correlation_id& id, int k, std::int32_t value) {
  return servekit::request_builder{}
      .input("INPUT", {1, 1}, {value})
      // The first request opens the sequence (and gets a slot); the last frees the slot.
      .sequence(id, {.start = k == 0, .end = k == steps - 1})
      .build();
}

template <class Strategy>
bool run(const char* label, const servekit::model_options& options) {
  for (auto& n : ended_by_reason) {
    n = 0;
  }
  accumulate_model<Strategy> model{options};

  const int total_sequences = threads * sequences_per_thread + 1;
  std::atomic<int> wrong{0};
  std::atomic<int> errors{0};
  std::latch done{total_sequences * steps};

  std::vector<std::jthread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      std::vector<servekit::correlation_id> ids;
      for (int s = 0; s < sequences_per_thread; ++s) {
        ids.emplace_back(static_cast<std::uint64_t>(1000 * (t + 1) + s));
      }
      if (t == 0) {
        ids.emplace_back(std::string{"session-alice"}); // string ids work the same way
      }
      std::vector<std::int32_t> sums(ids.size(), 0);
      // Step k of every sequence, then step k + 1: the sequences interleave. A sequence's
      // requests are submitted in order, which is the order they execute in.
      for (int k = 0; k < steps; ++k) {
        for (std::size_t s = 0; s < ids.size(); ++s) {
          const auto value = static_cast<std::int32_t>(k + 1 + static_cast<int>(s));
          sums[s] += value;
          const std::int32_t expected = sums[s];
          auto status = model.submit(step(ids[s], k, value), [&, expected](servekit::response&& r) {
            if (!r.ok()) {
              std::fprintf(stderr, "failed: %s\n", r.status.message().c_str());
              errors.fetch_add(1);
            } else if (const auto* out = r.find_output("OUTPUT");
                       out == nullptr || out->values<std::int32_t>()[0] != expected) {
              wrong.fetch_add(1);
            }
            done.count_down();
          });
          if (!status.ok()) { // refused at submit (e.g. a missing START): no sink call
            std::fprintf(stderr, "rejected: %s\n", status.message().c_str());
            errors.fetch_add(1);
            done.count_down();
          }
        }
      }
    });
  }
  done.wait();
  model.shutdown(servekit::shutdown_mode::drain);

  // Direct pads batches with empty slots below the highest ready one: padding counts in the
  // batch sizes (and so in the mean), not in inference_count.
  const auto stats = model.statistics();
  std::uint64_t elements = 0;
  for (const auto& b : stats.batch_stats) {
    elements += b.batch_size * b.compute_infer.count;
  }
  const auto executions = std::max<std::uint64_t>(stats.execution_count, 1);
  fmt::print("{}: {} sequences x {} steps, {} wrong, {} errors\n", label, total_sequences, steps,
             wrong.load(), errors.load());
  fmt::print("  {} executions, mean batch size {:.2f} ({:.2f} requests), {} ended by END\n",
             stats.execution_count, static_cast<double>(elements) / static_cast<double>(executions),
             static_cast<double>(stats.inference_count) / static_cast<double>(executions),
             ended_by_reason[static_cast<std::size_t>(servekit::sequence_end_reason::end)].load());
  return wrong.load() == 0 && errors.load() == 0;
}

} // namespace

int main(int argc, char** argv) {
  const std::filesystem::path directory = argc > 1 ? argv[1] : SERVEKIT_EXAMPLE_MODEL_DIR;
  try {
    std::ifstream file{directory / "config.json"};
    if (!file) {
      std::fprintf(stderr, "cannot read %s\n", (directory / "config.json").c_str());
      return 1;
    }
    std::stringstream text;
    text << file.rdbuf();
    servekit::model_options options = servekit::load_model_config(text.str());
    options.directory = directory.string(); // where initial_state/ files would be read from

    // The config says `direct`, which must match the model's type. For the oldest run, switch
    // the strategy (or load a second config with `"oldest": {...}`).
    bool ok = run<servekit::direct>("direct", options);
    options.sequence_batching->strategy = servekit::sequence_strategy::oldest;
    ok = run<servekit::oldest>("oldest", options) && ok;
    return ok ? 0 : 1;
  } catch (const std::exception& e) { // servekit::config_error for a bad config
    std::fprintf(stderr, "accumulate: %s\n", e.what());
    return 1;
  }
}
