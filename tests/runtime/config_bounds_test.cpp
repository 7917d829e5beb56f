// No configuration value sizes an allocation by itself: priority_levels up to 2^64 - 1 loads and
// serves (levels are stored sparsely, as Triton keeps only the levels in use), an instance
// count past max_instances_per_model is a config_error instead of an attempt to start that many
// threads, and every other numeric field of a model config either has a bound checked at load
// (runtime/config_bounds.hpp; a config_error naming the field, the value and the bound) or sizes
// nothing: one table below loads each field's absurd value and its value at the bound. Timeouts
// as large as uint64 allows mean "never" rather than overflowing the clock. (Sequence batching
// bounds: tests/schedule/sequence_batching_options_test.cpp.)
#include <servekit/config/model_config_json.hpp>
#include <servekit/runtime/config_bounds.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/simulated_shell.hpp>
#include <servekit/state/host_state_store.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <limits>
#include <new>
#include <optional>
#include <ostream>
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

namespace {

/// Takes any input and answers with no outputs: these tests load models, and warm them up.
struct open_backend {
  static constexpr bool batching = true; // max_batch_size: the config decides
  explicit open_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

enum class scheduler { dynamic, direct, oldest };

/// Loads `config` (Triton's JSON) into a model of `open_backend` under `s`; the config_error
/// it fails with, if any. Anything else thrown (std::bad_alloc above all) fails the test.
std::optional<servekit::config_error> load(scheduler s, const std::string& config) {
  try {
    const auto options = servekit::load_model_config(config);
    if (s == scheduler::dynamic) {
      servekit::model<open_backend, servekit::dynamic_batcher<>> m{options};
    } else if (s == scheduler::direct) {
      servekit::model<open_backend,
                      servekit::sequence_batcher<servekit::direct, servekit::host_state_store>>
          m{options};
    } else {
      servekit::model<open_backend,
                      servekit::sequence_batcher<servekit::oldest, servekit::host_state_store>>
          m{options};
    }
  } catch (const servekit::config_error& e) {
    return e;
  } catch (const std::bad_alloc&) {
    ADD_FAILURE() << "bad_alloc loading " << config;
  }
  return std::nullopt;
}

/// One field's value: `path` empty means it loads; otherwise the load fails at `path` with a
/// message containing `message`.
struct bound_case {
  const char* field;
  scheduler kind;
  std::string config;
  const char* path;
  const char* message;
};

const std::string warmup_head =
    R"({"max_batch_size": 8, "model_warmup": [{"name": "w", "batch_size": 1, "inputs": {"IN": )";

std::string warmup_input(const std::string& dims, const char* data = "zero_data") {
  return warmup_head + R"({"data_type": "TYPE_FP32", "dims": )" + dims + ", \"" + data +
         R"(": true}}}]})";
}

std::string state(const std::string& dims, const std::string& initial = "") {
  return R"({"max_batch_size": 2, "sequence_batching": {"state": [{"input_name": "IN_STATE",
    "output_name": "OUT_STATE", "data_type": "TYPE_INT32", "dims": )" +
         dims + (initial.empty() ? "" : R"(, "initial_state": [)" + initial + "]") + "}]}}";
}

const bound_case bound_cases[] = {
    // max_batch_size: statistics keep a counter per batch size.
    {"max_batch_size", scheduler::dynamic, R"({"max_batch_size": 2147483647})", "/max_batch_size",
     "'max_batch_size' must be at most 65536"},
    {"max_batch_size", scheduler::dynamic, R"({"max_batch_size": 9223372036854775808})",
     "/max_batch_size", "out of range for int32"},
    {"max_batch_size", scheduler::dynamic, R"({"max_batch_size": -1})", "/max_batch_size",
     "non-negative"},
    {"max_batch_size", scheduler::dynamic, R"({"max_batch_size": 65536})", "", ""},
    // preferred_batch_size: at most max_batch_size.
    {"preferred_batch_size", scheduler::dynamic,
     R"({"max_batch_size": 8, "dynamic_batching": {"preferred_batch_size": [2147483647]}})",
     "/dynamic_batching/preferred_batch_size/0", "must be <= max batch size"},
    // Queue sizes, delays and timeouts size nothing: counters, and deadlines that saturate.
    {"max_queue_size, timeouts", scheduler::dynamic,
     R"({"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds":
       18446744073709551615, "default_queue_policy": {"max_queue_size": 4294967295,
       "default_timeout_microseconds": 18446744073709551615}}})",
     "", ""},
    {"max_queue_size", scheduler::dynamic,
     R"({"dynamic_batching": {"default_queue_policy": {"max_queue_size": 18446744073709551615}}})",
     "/dynamic_batching/default_queue_policy/max_queue_size", "out of range for uint32"},
    // Input and output dims size nothing at load (requests carry their own shapes).
    {"input dims", scheduler::dynamic,
     R"({"input": [{"name": "IN", "data_type": "TYPE_FP32", "dims": [4611686018427387904, 4]}],
       "output": [{"name": "OUT", "data_type": "TYPE_FP32", "dims": [9223372036854775807]}]})",
     "", ""},
    // Rate limiter counts and priority are counters (the limiter is the server's).
    {"rate_limiter", scheduler::dynamic,
     R"({"instance_group": [{"kind": "KIND_CPU", "rate_limiter": {"resources": [{"name": "R",
       "count": 4294967295}], "priority": 4294967295}}]})",
     "", ""},
    // model_warmup: every execution runs before the model is ready; inputs are allocated.
    {"model_warmup count", scheduler::dynamic,
     warmup_head + R"({"data_type": "TYPE_FP32", "dims": [1], "zero_data": true}},
       "count": 4294967295}]})",
     "/model_warmup/0/count", "may run at most 10000 times, got count 4294967295"},
    {"model_warmup count", scheduler::dynamic,
     warmup_head + R"({"data_type": "TYPE_FP32", "dims": [1], "zero_data": true}},
       "count": 10000}]})",
     "", ""},
    {"model_warmup dims", scheduler::dynamic, warmup_input("[1099511627776]"),
     "/model_warmup/0/inputs/IN/dims", "may take at most 4294967296 bytes"},
    {"model_warmup dims", scheduler::dynamic,
     warmup_input("[9223372036854775807, 9223372036854775807]", "random_data"),
     "/model_warmup/0/inputs/IN/dims", "more than 2^64"},
    {"model_warmup dims", scheduler::dynamic, warmup_input("[-1]"),
     "/model_warmup/0/inputs/IN/dims/0", "must be >= 0"},
    {"model_warmup batch_size", scheduler::dynamic,
     R"({"max_batch_size": 8, "model_warmup": [{"name": "w", "batch_size": 4294967295,
       "inputs": {"IN": {"data_type": "TYPE_FP32", "dims": [1], "zero_data": true}}}]})",
     "/model_warmup/0/batch_size", "more than the model's max_batch_size 8"},
    // Implicit state: one sequence's state and its initial value are allocated by dims.
    {"state dims", scheduler::direct, state("[1099511627776]"), "/sequence_batching/state/0/dims",
     "state 'IN_STATE' may take at most 4294967296 bytes"},
    {"state dims", scheduler::direct, state("[4611686018427387904, 4611686018427387904]"),
     "/sequence_batching/state/0/dims", "more than 2^64"},
    {"initial_state dims", scheduler::direct,
     state("[-1]", R"({"name": "zeros", "data_type": "TYPE_INT32", "dims": [1099511627776],
       "zero_data": true})"),
     "/sequence_batching/state/0/initial_state/0/dims", "may take at most 4294967296 bytes"},
    {"state dims", scheduler::direct,
     state("[1024]", R"({"name": "zeros", "data_type": "TYPE_INT32", "dims": [1024],
       "zero_data": true})"),
     "", ""},
    // Sequence slots: instances x slots, each an entry of the sequence table made at load.
    {"sequence slots", scheduler::direct,
     R"({"max_batch_size": 65536, "sequence_batching": {}, "instance_group": [{"kind":
       "KIND_CPU", "count": 17}]})",
     "/sequence_batching", "at most 1048576 sequence slots"},
    {"sequence slots", scheduler::oldest,
     R"({"max_batch_size": 4, "sequence_batching": {"oldest": {"max_candidate_sequences": 65536}},
       "instance_group": [{"kind": "KIND_CPU", "count": 32}]})",
     "/sequence_batching", "32 instances of 65536 slots make 2097152"},
    {"max_sequence_idle_microseconds", scheduler::oldest,
     R"({"max_batch_size": 4, "sequence_batching": {"max_sequence_idle_microseconds":
       18446744073709551615, "oldest": {"max_candidate_sequences": 65536,
       "max_queue_delay_microseconds": 18446744073709551615}}})",
     "", ""},
    {"instance_group count", scheduler::dynamic,
     R"({"instance_group": [{"kind": "KIND_CPU", "count": 2147483647}]})",
     "/instance_group/0/count", "at most 1024 instances"},
    {"instance_group count", scheduler::dynamic,
     R"({"instance_group": [{"kind": "KIND_CPU", "count": -2147483648}]})",
     "/instance_group/0/count", ""},
    // iterative_sequence asks for the iteration scheduler: a request-level batcher refuses it by
    // name whichever batcher the model type has.
    {"iterative_sequence", scheduler::direct,
     R"({"max_batch_size": 4, "sequence_batching": {"iterative_sequence": true}})",
     "/sequence_batching/iterative_sequence",
     "compose a generative backend with servekit::iteration_batcher<>"},
    {"iterative_sequence", scheduler::dynamic,
     R"({"max_batch_size": 4, "sequence_batching": {"iterative_sequence": true}})",
     "/sequence_batching/iterative_sequence",
     "compose a generative backend with servekit::iteration_batcher<>"},
};

void PrintTo(const bound_case& c, std::ostream* os) { *os << c.field; }

class config_bound : public ::testing::TestWithParam<bound_case> {};

TEST_P(config_bound, loads_below_the_bound_and_fails_cleanly_past_it) {
  const auto& c = GetParam();
  const auto error = load(c.kind, c.config);
  if (std::string{c.path}.empty()) {
    EXPECT_FALSE(error) << c.field << ": " << error->what();
    return;
  }
  ASSERT_TRUE(error) << c.field << " loaded: " << c.config;
  EXPECT_EQ(error->path(), c.path) << error->what();
  EXPECT_NE(std::string{error->what()}.find(c.message), std::string::npos) << error->what();
}

INSTANTIATE_TEST_SUITE_P(fields, config_bound, ::testing::ValuesIn(bound_cases));

TEST(config_bounds, the_bounds_are_the_documented_ones) {
  static_assert(servekit::max_batch_size_limit == 65536);
  static_assert(servekit::max_sequence_slots_per_model == 1048576);
  static_assert(servekit::max_warmup_count == 10000);
  static_assert(servekit::max_config_tensor_bytes == 4294967296);
  // At the bound, without allocating 4 GiB: a warmup input and a state of exactly 4 GiB pass.
  auto options = servekit::load_model_config(
      warmup_head + R"({"data_type": "TYPE_FP32", "dims": [1073741824], "zero_data": true}}}]})");
  EXPECT_NO_THROW(servekit::detail::check_config_bounds(options, 8));
  options.model_warmup[0].batch_size = 2;
  EXPECT_THROW(servekit::detail::check_config_bounds(options, 8), servekit::config_error);
  options = servekit::load_model_config(state("[1073741824]"));
  EXPECT_NO_THROW(servekit::detail::check_config_bounds(options, 2));
  EXPECT_NO_THROW(servekit::detail::check_sequence_slots(16, 65536));
  EXPECT_THROW(servekit::detail::check_sequence_slots(std::numeric_limits<std::size_t>::max(), 2),
               servekit::config_error);
}

TEST(config_bounds, a_rate_limiter_resource_named_twice_must_still_add_up_to_a_count) {
  servekit::model_options o;
  servekit::instance_group_options group;
  group.kind = servekit::instance_group_kind::kind_cpu;
  group.rate_limiter = servekit::rate_limiter_options{
      {{"R", false, 4'000'000'000U}, {"R", false, 4'000'000'000U}}, 1};
  o.instance_group = {group};
  try {
    servekit::model<open_backend> m{o};
    FAIL() << "a resource count of 8e9 loaded";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/instance_group/0/rate_limiter/resources/1/count");
  }
}

servekit::time_point at_s(std::int64_t n) {
  return servekit::time_point{} + std::chrono::seconds(n);
}

// A delay of 2^64 - 1 microseconds is "never" (the batch waits to be full), also for a request
// arriving after the clock's epoch, where adding it to the arrival would overflow the clock.
TEST(config_bounds, the_largest_queue_delay_waits_for_a_full_batch) {
  const auto options = servekit::load_model_config(
      R"({"max_batch_size": 2, "dynamic_batching": {"max_queue_delay_microseconds":
          18446744073709551615}})");
  const auto config = servekit::resolve_config<open_backend>(
      options, servekit::scheduler_kind::dynamic_batcher, servekit::test_hooks{0, 0});
  servekit::simulated_shell<servekit::dynamic_batcher<>> sim{
      config.scheduler, 1, servekit::latency_model{std::chrono::microseconds(10), {}}};
  servekit::request first;
  first.id = "first";
  sim.submit_at(at_s(10), std::move(first), [](servekit::response&&) {});
  sim.run_until(at_s(3600));
  EXPECT_TRUE(sim.batches().empty());
  servekit::request second;
  second.id = "second";
  sim.submit_at(at_s(3600), std::move(second), [](servekit::response&&) {});
  sim.run();
  ASSERT_EQ(sim.batches().size(), 1U);
  EXPECT_EQ(sim.batches()[0].request_ids, (std::vector<std::string>{"first", "second"}));
}

// An idle limit of 2^64 - 1 microseconds never reaps a sequence.
TEST(config_bounds, the_largest_sequence_idle_limit_never_reaps) {
  const auto options = servekit::load_model_config(
      R"({"max_batch_size": 1, "sequence_batching": {"max_sequence_idle_microseconds":
          18446744073709551615}})");
  const auto config = servekit::resolve_config<open_backend>(
      options, servekit::scheduler_kind::sequence_direct, servekit::test_hooks{0, 0});
  struct no_store {};
  servekit::simulated_shell<servekit::sequence_batcher<servekit::direct, no_store>> sim{
      config.scheduler, 1, servekit::latency_model{std::chrono::microseconds(10), {}}};
  std::vector<std::string> answers;
  const auto step = [&](const char* id, std::int64_t at, bool start, bool end) {
    servekit::request r;
    r.id = id;
    r.sequence_id = std::uint64_t{7};
    r.sequence_start = start;
    r.sequence_end = end;
    sim.submit_at(at_s(at), std::move(r), [&answers, id](servekit::response&& a) {
      answers.push_back(std::string{id} + " " + std::string{servekit::to_string(a.status.code())});
    });
  };
  step("a0", 10, true, false);
  step("a1", 3600, false, true); // an hour later, still its sequence
  sim.run();
  EXPECT_EQ(answers, (std::vector<std::string>{"a0 OK", "a1 OK"}));
  EXPECT_TRUE(sim.ended().empty());
}

} // namespace
