// No configuration value sizes an allocation by itself: priority_levels up to 2^64 - 1 loads and
// serves (levels are stored sparsely, as Triton keeps only the levels in use), and an instance
// count past max_instances_per_model is a config_error instead of an attempt to start that many
// threads. (Sequence batching bounds: tests/schedule/sequence_batching_options_test.cpp.)
#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <future>
#include <limits>
#include <string>
#include <vector>

namespace {

using servekit::data_type;
using servekit::shape;

/// Copies INPUT0 (INT32 [1]) to OUTPUT0.
struct copy_backend {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT0", data_type::int32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT0", data_type::int32, {1}}};

  explicit copy_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("INPUT0");
      auto& out = b.response(i).add_output("OUTPUT0", data_type::int32, in.shape);
      out.values<std::int32_t>()[0] = in.values<std::int32_t>()[0];
    }
  }
};

servekit::request make_request(std::int32_t value, std::uint64_t priority) {
  servekit::request r;
  r.id = std::to_string(value);
  r.priority = priority;
  auto t = servekit::make_tensor("INPUT0", data_type::int32, shape{1, 1});
  t.values<std::int32_t>()[0] = value;
  r.inputs.push_back(std::move(t));
  return r;
}

TEST(config_bounds, priority_levels_up_to_uint64_max_load_and_serve_every_priority) {
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  servekit::model_options o;
  o.name = "priorities";
  servekit::dynamic_batching_options d;
  d.priority.priority_levels = max;
  d.priority.default_priority_level = max / 2;
  servekit::queue_policy bounded;
  bounded.max_queue_size = 4;
  d.priority.priority_queue_policy[3] = bounded;
  o.dynamic_batching = d;
  servekit::model<copy_backend, servekit::dynamic_batcher<>, servekit::instance_group<2>> m{o};
  std::vector<std::future<servekit::response>> answers;
  const std::vector<std::uint64_t> priorities{0, 1, 3, 1000, max / 2, max - 1, max};
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    answers.push_back(m.infer(make_request(static_cast<std::int32_t>(i), priorities[i])));
  }
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const auto r = answers[i].get();
    ASSERT_TRUE(r.ok()) << "priority " << priorities[i] << ": " << r.status.message();
    EXPECT_EQ(r.outputs.at(0).values<std::int32_t>()[0], static_cast<std::int32_t>(i));
  }
}

TEST(config_bounds, an_instance_count_past_the_limit_is_a_config_error) {
  servekit::model_options o;
  o.name = "many";
  servekit::instance_group_options group;
  group.kind = servekit::instance_group_kind::kind_cpu;
  group.count = std::numeric_limits<std::int32_t>::max();
  o.instance_group = {group};
  try {
    servekit::model<copy_backend> m{o};
    FAIL() << "a model with 2^31 - 1 instances loaded";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/instance_group/0/count");
    EXPECT_NE(std::string{e.what()}.find("at most 1024 instances"), std::string::npos) << e.what();
  }
  group.count = static_cast<std::int32_t>(servekit::max_instances_per_model);
  o.instance_group = {group};
  EXPECT_NO_THROW(servekit::resolve_instance_groups("many", o.instance_group, 1));
}

} // namespace
