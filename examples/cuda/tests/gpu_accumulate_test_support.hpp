#pragma once
// What the gpu_accumulate tests share: the bundled config placed where a test wants it, and
// interleaved sequences checked against their running sums.

#include "gpu_accumulate/gpu_accumulate_backend.hpp"

#include <servekit/config/model_config_json.hpp>
#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace accumulate_test {

template <class Strategy>
using accumulate_model = servekit::model<
    cuda_examples::gpu_accumulate_backend,
    servekit::sequence_batcher<Strategy, cuda_examples::gpu_accumulate_state_store>>;

/// examples/models/gpu_accumulate/config.json with one instance group of `kind`.
inline servekit::model_options bundled(servekit::instance_group_kind kind) {
  const auto dir = std::filesystem::path{SERVEKIT_EXAMPLE_MODELS_DIR} / "gpu_accumulate";
  std::ifstream in{dir / "config.json"};
  std::stringstream text;
  text << in.rdbuf();
  auto o = servekit::load_model_config(text.str());
  o.directory = dir.string();
  servekit::instance_group_options group;
  group.kind = kind;
  group.count = 1;
  if (kind == servekit::instance_group_kind::kind_gpu) {
    group.gpus = {0};
  }
  o.instance_group = {group};
  return o;
}

/// Request `step` (0-based) of sequence `id`, carrying `value`; the last of `steps` ends it.
inline servekit::request step_request(std::uint64_t id, int step, int steps, std::int32_t value) {
  servekit::request r;
  r.sequence_id = servekit::correlation_id{id};
  r.sequence_start = step == 0;
  r.sequence_end = step + 1 == steps;
  const std::array<std::int32_t, 1> v{value};
  r.inputs.push_back(servekit::make_tensor("INPUT", servekit::data_type::int32,
                                           servekit::shape{1, 1},
                                           std::span<const std::int32_t>{v}));
  return r;
}

/// Runs `sequences` sequences of `steps` steps, step k of every sequence before step k + 1 (so
/// they share batches), and expects every OUTPUT to be its sequence's running sum. Values are
/// large enough for the sums to wrap around INT32_MAX.
template <class Model>
void expect_running_sums(Model& m, int sequences, int steps) {
  std::vector<std::uint32_t> sums(static_cast<std::size_t>(sequences), 0);
  std::vector<std::pair<std::int32_t, std::future<servekit::response>>> pending;
  for (int k = 0; k < steps; ++k) {
    for (int s = 0; s < sequences; ++s) {
      const auto value = static_cast<std::int32_t>(0x30000000 + 1000 * s + k);
      auto& sum = sums[static_cast<std::size_t>(s)];
      sum += static_cast<std::uint32_t>(value);
      pending.emplace_back(
          static_cast<std::int32_t>(sum),
          m.infer(step_request(static_cast<std::uint64_t>(100 + s), k, steps, value)));
    }
  }
  for (auto& [expected, future] : pending) {
    const servekit::response r = future.get();
    ASSERT_TRUE(r.ok()) << r.status.message();
    const servekit::tensor* out = r.find_output("OUTPUT");
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(out->shape, (servekit::shape{1, 1}));
    EXPECT_EQ(out->values<std::int32_t>()[0], expected);
    EXPECT_EQ(r.find_output("OUTPUT_STATE"), nullptr) << "the state stays with servekit";
  }
}

} // namespace accumulate_test
