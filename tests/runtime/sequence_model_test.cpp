// The sequence batcher on real threads (sequence_shell): routing of every request of a sequence
// to one instance and slot, one request of a sequence at a time, exactly one final response per
// accepted request, implicit state between requests, control tensors, the end-of-sequence hook,
// errors at submit, cancellation and shutdown. Timing rules are tested in virtual time
// (tests/schedule/sequence_batcher_test.cpp); threads here are coordinated with futures and
// gates, never with sleeps.
#include "archetypes/gate.hpp"

#include <servekit/runtime/model.hpp>
#include <servekit/state/host_state_store.hpp>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sequence_model_test {

using namespace std::chrono_literals;
using servekit::data_type;
using servekit::shape;

using archetypes::gate;

/// What the backends saw, shared by every instance of a test.
struct observations {
  std::mutex mutex;
  /// correlation id (as text) -> (instance, slot) of each of its executions.
  std::map<std::string, std::vector<std::pair<std::size_t, std::uint32_t>>> placements;
  std::vector<servekit::sequence_end> ended;
  std::condition_variable ended_cv;
  std::atomic<int> executing{0}; ///< per test: sequences executing right now, checked below
  std::map<std::string, int> in_execution;
  bool overlap = false;               ///< a sequence executed twice at once, or twice in one batch
  bool mismatch = false;              ///< a control tensor disagreed with the typed accessors
  gate* hold = nullptr;               ///< when set, execute waits here
  std::atomic<bool> fail_next{false}; ///< the next execution throws
  std::vector<std::int32_t> start_states; ///< INPUT_STATE handed to each START request
};
observations* seen = nullptr; // NOLINT: test-only global, set by each test

template <class T>
T scalar(const servekit::tensor& t) {
  return t.values<T>()[0];
}

/// OUTPUT = INPUT + INPUT_STATE (INPUT alone on START), and the same into OUTPUT_STATE: the
/// running sum of a sequence, kept as implicit state. It checks the control tensors against the
/// typed accessors and records where each sequence ran.
struct accumulator {
  static constexpr std::int32_t max_batch_size = 4;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT", data_type::int32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUTPUT", data_type::int32, {1}}, {"OUTPUT_STATE", data_type::int32, {1}}};

  explicit accumulator(const servekit::instance_context& context)
      : instance{context.instance_index} {}

  void execute(servekit::batch& b) {
    if (seen->hold != nullptr) {
      EXPECT_TRUE(seen->hold->wait());
    }
    record_entry(b);
    if (seen->fail_next.exchange(false)) {
      leave(b);
      throw std::runtime_error("injected failure");
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::sequence_controls& c = b.sequence(i);
      if (!c.ready) {
        continue;
      }
      servekit::request& r = b.request(i);
      check_controls(r, c, b.correlation(i));
      const auto in = scalar<std::int32_t>(*r.find_input("INPUT"));
      const auto state = scalar<std::int32_t>(*r.find_input("INPUT_STATE"));
      if (c.start) {
        const std::lock_guard lock{seen->mutex};
        seen->start_states.push_back(state);
      }
      const std::array<std::int32_t, 1> sum{in + (c.start ? 0 : state)};
      b.response(i).outputs.push_back(servekit::make_tensor("OUTPUT", data_type::int32, shape{1, 1},
                                                            std::span<const std::int32_t>{sum}));
      b.response(i).outputs.push_back(servekit::make_tensor(
          "OUTPUT_STATE", data_type::int32, shape{1, 1}, std::span<const std::int32_t>{sum}));
    }
    leave(b);
  }

  void sequence_ended(const servekit::sequence_end& e) {
    {
      const std::lock_guard lock{seen->mutex};
      seen->ended.push_back(e);
    }
    seen->ended_cv.notify_all();
  }

  void record_entry(servekit::batch& b) {
    const std::lock_guard lock{seen->mutex};
    std::map<std::string, int> in_batch;
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (!b.sequence(i).ready) {
        continue;
      }
      const std::string id = b.correlation(i).to_string();
      seen->placements[id].emplace_back(instance, b.sequence(i).slot);
      if (++in_batch[id] > 1 || seen->in_execution[id]++ != 0) {
        seen->overlap = true;
      }
    }
  }

  static void leave(servekit::batch& b) {
    const std::lock_guard lock{seen->mutex};
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (b.sequence(i).ready) {
        --seen->in_execution[b.correlation(i).to_string()];
      }
    }
  }

  static void check_controls(const servekit::request& r, const servekit::sequence_controls& c,
                             const servekit::correlation_id& id) {
    const auto* start = r.find_input("START");
    const auto* end = r.find_input("END");
    const auto* ready = r.find_input("READY");
    const auto* corrid = r.find_input("CORRID");
    if (start == nullptr || end == nullptr || ready == nullptr || corrid == nullptr) {
      return; // this test's config has no controls
    }
    const bool ok = scalar<float>(*start) == (c.start ? 1.0F : 0.0F) &&
                    scalar<std::int32_t>(*end) == (c.end ? 1 : 0) &&
                    (scalar<std::uint8_t>(*ready) != 0) == c.ready &&
                    scalar<std::uint64_t>(*corrid) == id.as_uint() && start->shape == shape{1};
    if (!ok) {
      const std::lock_guard lock{seen->mutex};
      seen->mismatch = true;
    }
  }

  std::size_t instance;
};

servekit::model_options accumulator_options(servekit::sequence_strategy strategy) {
  servekit::model_options o;
  o.name = "accumulate";
  o.output = {{"OUTPUT", data_type::int32, shape{1}}, {"OUTPUT_STATE", data_type::int32, shape{1}}};
  o.input = {{"INPUT", data_type::int32, shape{1}}};
  servekit::sequence_batching_options sb;
  sb.strategy = strategy;
  sb.state.push_back({"INPUT_STATE", "OUTPUT_STATE", data_type::int32, shape{1}, {}, false, false});
  o.sequence_batching = sb;
  return o;
}

servekit::request step(servekit::correlation_id id, std::int32_t value, bool start, bool end) {
  servekit::request r;
  r.id = id.to_string() + ":" + std::to_string(value);
  r.sequence_id = std::move(id);
  r.sequence_start = start;
  r.sequence_end = end;
  const std::array<std::int32_t, 1> v{value};
  r.inputs.push_back(servekit::make_tensor("INPUT", data_type::int32, shape{1, 1},
                                           std::span<const std::int32_t>{v}));
  r.requested_outputs = {"OUTPUT"};
  return r;
}

std::int32_t output(const servekit::response& r) {
  return r.ok() && !r.outputs.empty() ? scalar<std::int32_t>(r.outputs[0]) : -1;
}

template <class Strategy>
using accumulate_model =
    servekit::model<accumulator, servekit::sequence_batcher<Strategy, servekit::host_state_store>,
                    servekit::instance_group<2>>;

template <class Strategy>
class sequence_model_test : public ::testing::Test {
protected:
  void SetUp() override { seen = &observed; }
  void TearDown() override { seen = nullptr; }

  static constexpr servekit::sequence_strategy strategy =
      Strategy::strategy; // NOLINT(readability-identifier-naming)
  observations observed;
};

using strategies = ::testing::Types<servekit::direct, servekit::oldest>;
class strategy_names {
public:
  template <class T>
  static std::string GetName(int) { // NOLINT(readability-identifier-naming): gtest's name
    return std::is_same_v<T, servekit::direct> ? "direct" : "oldest";
  }
};
TYPED_TEST_SUITE(sequence_model_test, strategies, strategy_names);

// Many interleaved sequences from several threads, more than there are slots: every request
// gets exactly one response with its sequence's running sum; a sequence stays on one instance
// and slot and never runs two requests at once; the state is freed when it ends.
TYPED_TEST(sequence_model_test, interleaved_sequences_keep_their_slot_state_and_order) {
  accumulate_model<TypeParam> m{accumulator_options(TestFixture::strategy)};
  constexpr int threads = 4;
  constexpr int sequences_per_thread = 6; // 24 sequences for 2 x 4 slots: most wait a while
  constexpr int steps = 25;
  std::atomic<int> wrong{0};
  std::atomic<int> answered{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      // Each thread drives its sequences round-robin, pipelining every sequence's steps: the
      // model must keep their order.
      std::vector<std::vector<std::future<servekit::response>>> futures(sequences_per_thread);
      for (int k = 1; k <= steps; ++k) {
        for (int s = 0; s < sequences_per_thread; ++s) {
          const auto id = static_cast<std::uint64_t>(1 + t * sequences_per_thread + s);
          futures[static_cast<std::size_t>(s)].push_back(m.infer(step(id, k, k == 1, k == steps)));
        }
      }
      for (auto& sequence : futures) {
        for (std::size_t k = 0; k < sequence.size(); ++k) {
          const auto expected = static_cast<std::int32_t>((k + 1) * (k + 2) / 2);
          const servekit::response r = sequence[k].get();
          ++answered;
          if (output(r) != expected) {
            ++wrong;
          }
        }
      }
    });
  }
  for (auto& c : clients) {
    c.join();
  }
  EXPECT_EQ(answered.load(), threads * sequences_per_thread * steps);
  EXPECT_EQ(wrong.load(), 0);
  m.shutdown(servekit::shutdown_mode::drain);

  EXPECT_FALSE(this->observed.overlap);
  EXPECT_EQ(this->observed.placements.size(),
            static_cast<std::size_t>(threads * sequences_per_thread));
  for (const auto& [id, where] : this->observed.placements) {
    EXPECT_EQ(where.size(), static_cast<std::size_t>(steps)) << id;
    for (const auto& p : where) {
      EXPECT_EQ(p, where.front()) << "sequence " << id << " moved";
    }
  }
  EXPECT_EQ(this->observed.ended.size(), static_cast<std::size_t>(threads * sequences_per_thread));
  for (const auto& e : this->observed.ended) {
    EXPECT_EQ(e.reason, servekit::sequence_end_reason::end);
  }
  EXPECT_EQ(m.states().live_sequences(), 0U);
  EXPECT_EQ(m.states().bytes_in_use(), 0U);
  // Without initial_state a sequence starts from zeros (Triton leaves it uninitialised).
  for (const auto v : this->observed.start_states) {
    EXPECT_EQ(v, 0);
  }
  const auto stats = m.statistics();
  EXPECT_EQ(stats.success.count,
            static_cast<std::uint64_t>(threads * sequences_per_thread * steps));
  EXPECT_EQ(stats.inference_count,
            static_cast<std::uint64_t>(threads * sequences_per_thread * steps));
}

// Triton's errors at submit, returned by submit itself (the sink is never called).
TYPED_TEST(sequence_model_test, sequence_rules_are_enforced_at_submit) {
  accumulate_model<TypeParam> m{accumulator_options(TestFixture::strategy)};
  const auto refuse = [&](servekit::request r) {
    bool called = false;
    const servekit::status s = m.submit(std::move(r), [&](servekit::response&&) { called = true; });
    EXPECT_FALSE(called);
    return s;
  };

  auto s = refuse(step(std::uint64_t{0}, 1, true, false));
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  EXPECT_EQ(s.message(), "inference request to model 'accumulate' must specify a non-zero or "
                         "non-empty correlation ID");
  s = refuse(step("", 1, true, false));
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);

  s = refuse(step(std::uint64_t{7}, 1, false, false));
  EXPECT_EQ(s.message(), "inference request for sequence 7 to model 'accumulate' must specify "
                         "the START flag on the first request of the sequence");

  auto two = step(std::uint64_t{8}, 1, true, false);
  const std::array<std::int32_t, 2> values{1, 2};
  two.inputs[0] = servekit::make_tensor("INPUT", data_type::int32, shape{2, 1},
                                        std::span<const std::int32_t>{values});
  s = refuse(std::move(two));
  EXPECT_EQ(s.message(), "inference request to model 'accumulate' must specify batch-size 1 due "
                         "to requirements of sequence batcher");

  // After END, the id is unknown again until a new START.
  EXPECT_EQ(output(m.infer(step(std::uint64_t{9}, 5, true, true)).get()), 5);
  s = refuse(step(std::uint64_t{9}, 1, false, false));
  EXPECT_NE(s.message().find("must specify the START flag"), std::string::npos);
  EXPECT_EQ(output(m.infer(step(std::uint64_t{9}, 6, true, true)).get()), 6);
}

// A string correlation id works like a number; a second START restarts the sequence in place
// with its state re-initialised.
TYPED_TEST(sequence_model_test, string_ids_and_restarted_sequences) {
  accumulate_model<TypeParam> m{accumulator_options(TestFixture::strategy)};
  EXPECT_EQ(output(m.infer(step("session-a", 2, true, false)).get()), 2);
  EXPECT_EQ(output(m.infer(step("session-a", 3, false, false)).get()), 5);
  EXPECT_EQ(output(m.infer(step("session-a", 10, true, false)).get()), 10); // restarted
  EXPECT_EQ(output(m.infer(step("session-a", 1, false, true)).get()), 11);
  m.shutdown(servekit::shutdown_mode::drain);
  const auto& where = this->observed.placements["session-a"];
  ASSERT_EQ(where.size(), 4U);
  EXPECT_EQ(where[2], where[0]); // the restart kept its slot
}

// The client may ask for the output state only when the config lists it as an output.
TYPED_TEST(sequence_model_test, output_state_is_returned_only_when_listed) {
  {
    accumulate_model<TypeParam> m{accumulator_options(TestFixture::strategy)};
    auto r = step(std::uint64_t{1}, 4, true, true);
    r.requested_outputs = {"OUTPUT", "OUTPUT_STATE"};
    const servekit::response out = m.infer(std::move(r)).get();
    ASSERT_TRUE(out.ok()) << out.status.message();
    ASSERT_EQ(out.outputs.size(), 2U);
    EXPECT_EQ(out.outputs[1].name, "OUTPUT_STATE");
    EXPECT_EQ(scalar<std::int32_t>(out.outputs[1]), 4);
  }
  auto options = accumulator_options(TestFixture::strategy);
  options.output.pop_back(); // OUTPUT_STATE is not a declared output
  accumulate_model<TypeParam> m{options};
  auto r = step(std::uint64_t{1}, 4, true, true);
  r.requested_outputs = {"OUTPUT_STATE"};
  const servekit::status s = m.submit(std::move(r), [](servekit::response&&) {});
  EXPECT_EQ(s.message(), "unexpected inference output 'OUTPUT_STATE' for model 'accumulate'");
  // And asking for everything does not leak the state.
  auto all = step(std::uint64_t{2}, 4, true, true);
  all.requested_outputs.clear();
  const servekit::response out = m.infer(std::move(all)).get();
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out.outputs.size(), 1U);
  EXPECT_EQ(out.outputs[0].name, "OUTPUT");
}

// A backend failure fails the requests of that execution and leaves the state as it was; the
// sequence goes on.
TYPED_TEST(sequence_model_test, backend_failure_keeps_the_previous_state) {
  accumulate_model<TypeParam> m{accumulator_options(TestFixture::strategy)};
  EXPECT_EQ(output(m.infer(step(std::uint64_t{3}, 2, true, false)).get()), 2);
  this->observed.fail_next = true;
  const servekit::response failed = m.infer(step(std::uint64_t{3}, 100, false, false)).get();
  EXPECT_EQ(failed.status.code(), servekit::status_code::internal);
  EXPECT_NE(failed.status.message().find("injected failure"), std::string::npos);
  EXPECT_EQ(output(m.infer(step(std::uint64_t{3}, 3, false, true)).get()), 5);
}

// Cancelling a request of a backlogged sequence cancels all of it; the sequences holding slots
// are untouched.
TYPED_TEST(sequence_model_test, cancelling_a_backlogged_sequence_cancels_all_of_it) {
  gate release;
  this->observed.hold = &release;
  auto options = accumulator_options(TestFixture::strategy);
  options.max_batch_size = 1; // 2 slots in all
  accumulate_model<TypeParam> m{options};
  auto a = m.infer(step(std::uint64_t{1}, 1, true, false));
  auto b = m.infer(step(std::uint64_t{2}, 1, true, false));
  servekit::cancellation_source source;
  auto c1 = step(std::uint64_t{3}, 1, true, false); // backlogged: no slot is free
  c1.cancellation = source.token();
  auto f1 = m.infer(std::move(c1));
  auto f2 = m.infer(step(std::uint64_t{3}, 2, false, false));
  m.cancel(source);
  EXPECT_EQ(f1.get().status.code(), servekit::status_code::cancelled);
  EXPECT_EQ(f2.get().status.code(), servekit::status_code::cancelled);
  release.open();
  EXPECT_EQ(output(a.get()), 1);
  EXPECT_EQ(output(b.get()), 1);
  // The cancelled id is forgotten.
  const servekit::status s =
      m.submit(step(std::uint64_t{3}, 3, false, false), [](servekit::response&&) {});
  EXPECT_NE(s.message().find("must specify the START flag"), std::string::npos);
}

// An idle sequence is reaped: the hook hears of it, the state is freed, the id is forgotten and
// its slot goes to the backlog.
TYPED_TEST(sequence_model_test, idle_sequence_is_reaped_and_the_backend_told) {
  auto options = accumulator_options(TestFixture::strategy);
  options.max_batch_size = 1;
  options.sequence_batching->max_sequence_idle_microseconds = 2000;
  accumulate_model<TypeParam> m{options};
  EXPECT_EQ(output(m.infer(step(std::uint64_t{1}, 1, true, false)).get()), 1);
  EXPECT_EQ(output(m.infer(step(std::uint64_t{2}, 1, true, false)).get()), 1);
  // Both slots are taken; sequence 3 waits in the backlog until one of the others is reaped.
  EXPECT_EQ(output(m.infer(step(std::uint64_t{3}, 7, true, true)).get()), 7);
  {
    std::unique_lock lock{this->observed.mutex};
    ASSERT_TRUE(this->observed.ended_cv.wait_for(lock, 10s, [&] {
      return std::count_if(this->observed.ended.begin(), this->observed.ended.end(),
                           [](const auto& e) {
                             return e.reason == servekit::sequence_end_reason::idle_timeout;
                           }) == 2;
    }));
  }
  const servekit::status s =
      m.submit(step(std::uint64_t{1}, 1, false, false), [](servekit::response&&) {});
  EXPECT_NE(s.message().find("must specify the START flag"), std::string::npos);
  EXPECT_EQ(m.states().live_sequences(), 0U);
}

// Shutting down with open sequences: what is queued executes, backlogged sequences get slots
// from open ones that have nothing queued, and every open sequence ends with reason shutdown.
TYPED_TEST(sequence_model_test, drain_runs_the_backlog_and_ends_open_sequences) {
  auto options = accumulator_options(TestFixture::strategy);
  options.max_batch_size = 1;
  accumulate_model<TypeParam> m{options};
  EXPECT_EQ(output(m.infer(step(std::uint64_t{1}, 1, true, false)).get()), 1);
  EXPECT_EQ(output(m.infer(step(std::uint64_t{2}, 1, true, false)).get()), 1);
  auto backlogged = m.infer(step(std::uint64_t{3}, 4, true, false));
  m.shutdown(servekit::shutdown_mode::drain);
  EXPECT_EQ(output(backlogged.get()), 4);
  EXPECT_EQ(this->observed.ended.size(), 3U);
  for (const auto& e : this->observed.ended) {
    EXPECT_EQ(e.reason, servekit::sequence_end_reason::shutdown);
  }
  EXPECT_EQ(m.states().live_sequences(), 0U);
  const servekit::status s =
      m.submit(step(std::uint64_t{4}, 1, true, false), [](servekit::response&&) {});
  EXPECT_EQ(s.code(), servekit::status_code::unavailable);
}

// Memory follows the live sequences, not the sequences ever seen.
TYPED_TEST(sequence_model_test, state_memory_is_bounded_by_live_sequences) {
  accumulate_model<TypeParam> m{accumulator_options(TestFixture::strategy)};
  for (int round = 0; round < 50; ++round) {
    std::vector<std::future<servekit::response>> open;
    for (int s = 0; s < 4; ++s) {
      open.push_back(
          m.infer(step(static_cast<std::uint64_t>(100 + round * 4 + s), 1, true, false)));
    }
    for (auto& f : open) {
      EXPECT_EQ(output(f.get()), 1);
    }
    EXPECT_LE(m.states().live_sequences(), 4U);
    EXPECT_LE(m.states().bytes_in_use(), 4U * sizeof(std::int32_t));
    for (int s = 0; s < 4; ++s) {
      EXPECT_EQ(
          output(
              m.infer(step(static_cast<std::uint64_t>(100 + round * 4 + s), 1, false, true)).get()),
          2);
    }
    EXPECT_EQ(m.states().live_sequences(), 0U);
  }
  EXPECT_EQ(m.states().bytes_in_use(), 0U);
}

// Control inputs reach the backend as tensors of the configured types, agreeing with the typed
// accessors (checked inside the backend).
TYPED_TEST(sequence_model_test, control_tensors_carry_the_configured_encodings) {
  auto options = accumulator_options(TestFixture::strategy);
  const auto control = [](const char* name, servekit::control_kind kind) {
    servekit::control_input input;
    input.name = name;
    input.control.emplace_back();
    input.control.back().kind = kind;
    return input;
  };
  auto& controls = options.sequence_batching->control_input;
  controls.push_back(control("START", servekit::control_kind::sequence_start));
  controls.back().control[0].fp32_false_true = {0.0F, 1.0F};
  controls.push_back(control("END", servekit::control_kind::sequence_end));
  controls.back().control[0].int32_false_true = {0, 1};
  controls.push_back(control("READY", servekit::control_kind::sequence_ready));
  controls.back().control[0].bool_false_true = {false, true};
  controls.push_back(control("CORRID", servekit::control_kind::sequence_corrid));
  controls.back().control[0].data_type = data_type::uint64;
  accumulate_model<TypeParam> m{options};
  std::vector<std::future<servekit::response>> futures;
  for (std::uint64_t id = 1; id <= 6; ++id) {
    for (int k = 1; k <= 3; ++k) {
      futures.push_back(m.infer(step(id, k, k == 1, k == 3)));
    }
  }
  for (auto& f : futures) {
    EXPECT_TRUE(f.get().ok());
  }
  m.shutdown(servekit::shutdown_mode::drain);
  EXPECT_FALSE(this->observed.mismatch);
  // A string id cannot be written into an integer CORRID.
  accumulate_model<TypeParam> m2{options};
  const servekit::status s = m2.submit(step("abc", 1, true, false), [](servekit::response&&) {});
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  EXPECT_NE(s.message().find("CORRID"), std::string::npos);
}

TEST(sequence_model_config, strategy_in_the_config_must_match_the_type) {
  observations observed;
  seen = &observed;
  auto options = accumulator_options(servekit::sequence_strategy::oldest);
  try {
    accumulate_model<servekit::direct> m{options};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/sequence_batching/oldest");
  }
  options.sequence_batching->strategy = servekit::sequence_strategy::direct;
  options.sequence_batching->state[0].use_same_buffer_for_input_output = true;
  options.sequence_batching->state[0].use_growable_memory = true;
  try {
    accumulate_model<servekit::direct> m{options};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/sequence_batching/state/0/use_growable_memory");
  }
  seen = nullptr;
}

// initial_state from a data file in the model's directory starts every sequence.
TEST(sequence_model_config, initial_state_is_read_from_the_model_directory) {
  observations observed;
  seen = &observed;
  const auto dir = std::filesystem::temp_directory_path() / "servekit_sequence_model_test";
  std::filesystem::create_directories(dir / "initial_state");
  {
    const std::int32_t forty = 40;
    std::ofstream f{dir / "initial_state" / "forty.bin", std::ios::binary};
    f.write(reinterpret_cast<const char*>(&forty), sizeof forty); // NOLINT: raw bytes
  }
  auto options = accumulator_options(servekit::sequence_strategy::direct);
  options.directory = dir.string();
  servekit::initial_state_options initial;
  initial.data_type = data_type::int32;
  initial.dims = shape{1};
  initial.name = "forty";
  initial.data_file = "forty.bin";
  options.sequence_batching->state[0].initial_state = {initial};
  {
    accumulate_model<servekit::direct> m{options};
    EXPECT_EQ(output(m.infer(step(std::uint64_t{1}, 2, true, true)).get()), 2);
    EXPECT_EQ(output(m.infer(step(std::uint64_t{2}, 2, true, true)).get()), 2);
  }
  EXPECT_EQ(observed.start_states, (std::vector<std::int32_t>{40, 40}));
  std::filesystem::remove_all(dir);
  seen = nullptr;
}

} // namespace sequence_model_test
