// sequence_batcher: Triton's sequence batcher rules (triton-semantics.md §1.3, §2.3, and the
// direct and oldest examples of Triton's model configuration guide), each checked in virtual
// time through the simulated shell. Times are µs since the simulation began.
//
// A batch entry is written "<request id> <slot> <flags>", flags being the controls the backend
// sees: S (START), E (END), R (READY). A padding entry is "- <slot>" (no request, every control
// false), so "- 0" is an empty slot 0 padding a batch whose slot 1 is ready.

#include <servekit/backend/batch_compatibility.hpp>
#include <servekit/backend/sequence_controls.hpp>
#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/batch_close_reason.hpp>
#include <servekit/core/cancellation.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/runtime/simulated_shell.hpp>
#include <servekit/schedule/scheduler.hpp>
#include <servekit/schedule/sequence_batcher.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace sequence_batcher_test {

using servekit::batch_close_reason;
using servekit::sequence_end_reason;

const std::string ok_code{"OK"};
const std::string unavailable_code{"UNAVAILABLE"};
const std::string cancelled_code{"CANCELLED"};
const std::string invalid_arg_code{"INVALID_ARG"};

const std::string start_flag_error_tail{
    "must specify the START flag on the first request of the sequence"};
const std::string sequence_timeout_message{
    "timeout of the corresponding sequence has been expired"};

/// The policy does not look at the state store; any type will do.
struct no_store {};

servekit::time_point at_us(std::int64_t n) {
  return servekit::time_point{} + std::chrono::microseconds(n);
}

std::int64_t us_of(servekit::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t - servekit::time_point{}).count();
}

servekit::latency_model latency(std::int64_t fixed) {
  return servekit::latency_model{std::chrono::microseconds(fixed), {}};
}

/// A direct-strategy model "m".
servekit::scheduler_settings direct_model(std::int32_t max_batch_size,
                                          std::uint64_t idle_us = 1'000'000) {
  servekit::sequence_batching_options sb;
  sb.strategy = servekit::sequence_strategy::direct;
  sb.max_sequence_idle_microseconds = idle_us;
  return servekit::scheduler_settings{.model_name = "m",
                                      .max_batch_size = max_batch_size,
                                      .dynamic_batching = {},
                                      .compatibility = {},
                                      .sequence_batching = sb};
}

/// An oldest-strategy model "m".
servekit::scheduler_settings oldest_model(std::int32_t max_batch_size, std::int32_t candidates = 0,
                                          std::vector<std::int32_t> preferred = {},
                                          std::uint64_t idle_us = 1'000'000) {
  servekit::sequence_batching_options sb;
  sb.strategy = servekit::sequence_strategy::oldest;
  sb.max_sequence_idle_microseconds = idle_us;
  sb.oldest.max_candidate_sequences = candidates;
  sb.oldest.preferred_batch_size = std::move(preferred);
  return servekit::scheduler_settings{.model_name = "m",
                                      .max_batch_size = max_batch_size,
                                      .dynamic_batching = {},
                                      .compatibility = {},
                                      .sequence_batching = sb};
}

/// Which controls a request carries.
enum class flags { start, middle, end, start_end };

/// Request `id` of sequence `corr`.
servekit::request seq(std::string id, servekit::correlation_id corr, flags f,
                      std::uint64_t timeout_us = 0) {
  servekit::request r;
  r.id = std::move(id);
  r.sequence_id = std::move(corr);
  r.sequence_start = f == flags::start || f == flags::start_end;
  r.sequence_end = f == flags::end || f == flags::start_end;
  r.timeout_us = timeout_us;
  return r;
}

struct answer {
  std::string code;
  std::string message;
  std::int64_t at_us = -1;
};

/// An executed batch: its instance, start time and entries (see the top of the file).
struct seen_batch {
  std::size_t instance = 0;
  std::int64_t start_us = 0;
  std::vector<std::string> entries;
  friend bool operator==(const seen_batch&, const seen_batch&) = default;
};

void PrintTo(const seen_batch& b, std::ostream* os) {
  *os << "{instance " << b.instance << ", start " << b.start_us << "us, [";
  for (std::size_t i = 0; i < b.entries.size(); ++i) {
    *os << (i == 0 ? "" : ", ") << b.entries[i];
  }
  *os << "]}";
}

/// A sequence that left its slot without END, as ended() reports it.
struct seen_end {
  std::size_t instance = 0;
  std::int64_t at_us = 0;
  std::string id;
  std::uint32_t slot = 0;
  sequence_end_reason reason = sequence_end_reason::end;
  friend bool operator==(const seen_end&, const seen_end&) = default;
};

void PrintTo(const seen_end& e, std::ostream* os) {
  *os << "{instance " << e.instance << ", at " << e.at_us << "us, sequence " << e.id << ", slot "
      << e.slot << ", " << servekit::to_string(e.reason) << "}";
}

std::string entry(const std::string& id, const servekit::sequence_controls& c) {
  std::string out = (id.empty() ? std::string{"-"} : id) + " " + std::to_string(c.slot);
  std::string f;
  f += c.start ? "S" : "";
  f += c.end ? "E" : "";
  f += c.ready ? "R" : "";
  return f.empty() ? out : out + " " + f;
}

/// A simulated model under the sequence batcher, recording every response (id -> answers).
template <class Strategy>
class rig {
public:
  using policy = servekit::sequence_batcher<Strategy, no_store>;

  rig(const servekit::scheduler_settings& settings, std::size_t instances,
      servekit::latency_model model)
      : sim{settings, instances, model} {}
  rig(const rig&) = delete;
  rig& operator=(const rig&) = delete;

  void submit(std::int64_t t, servekit::request r, std::int64_t elements = 1) {
    sim.submit_at(at_us(t), std::move(r), sink(), elements);
  }

  servekit::response_sink sink() {
    return [this](servekit::response&& r) {
      answers[r.id].push_back({std::string{servekit::to_string(r.status.code())},
                               r.status.message(), us_of(sim.now())});
    };
  }

  /// The single answer of `id`; a default answer (at_us -1) if there is none.
  [[nodiscard]] answer only(const std::string& id) const {
    const auto it = answers.find(id);
    if (it == answers.end()) {
      ADD_FAILURE() << id << " was never answered";
      return {};
    }
    EXPECT_EQ(it->second.size(), 1U) << id << " was answered more than once";
    return it->second.front();
  }

  [[nodiscard]] std::vector<seen_batch> batches() const {
    std::vector<seen_batch> out;
    for (const auto& b : sim.batches()) {
      seen_batch s{b.instance, us_of(b.start), {}};
      EXPECT_EQ(b.request_ids.size(), b.sequence.size());
      EXPECT_EQ(b.elements, static_cast<std::int64_t>(b.request_ids.size()));
      for (std::size_t k = 0; k < b.request_ids.size() && k < b.sequence.size(); ++k) {
        s.entries.push_back(entry(b.request_ids[k], b.sequence[k]));
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  [[nodiscard]] std::vector<seen_end> ended() const {
    std::vector<seen_end> out;
    for (const auto& e : sim.ended()) {
      out.push_back(
          {e.instance, us_of(e.at), e.notice.id.to_string(), e.notice.slot, e.notice.reason});
    }
    return out;
  }

  /// Every request in `ids` was answered ok exactly once.
  void expect_all_ok(const std::vector<std::string>& ids) const {
    for (const auto& id : ids) {
      EXPECT_EQ(only(id).code, ok_code) << id << ": " << only(id).message;
    }
  }

  servekit::simulated_shell<policy> sim;
  std::map<std::string, std::vector<answer>> answers;
};

using batches_t = std::vector<seen_batch>;
using ends_t = std::vector<seen_end>;

/// The settings a typed test uses for `Strategy` (oldest: candidates = max_batch_size).
template <class Strategy>
servekit::scheduler_settings model_for(std::int32_t max_batch_size,
                                       std::uint64_t idle_us = 1'000'000) {
  if constexpr (Strategy::strategy == servekit::sequence_strategy::direct) {
    return direct_model(max_batch_size, idle_us);
  } else {
    return oldest_model(max_batch_size, 0, {}, idle_us);
  }
}

template <class Strategy>
class sequence_batcher_both : public ::testing::Test {};
using strategies = ::testing::Types<servekit::direct, servekit::oldest>;

struct strategy_names {
  template <class T>
  static std::string GetName(int) {
    return T::strategy == servekit::sequence_strategy::direct ? "direct" : "oldest";
  }
};
TYPED_TEST_SUITE(sequence_batcher_both, strategies, strategy_names);

// ---------------------------------------------------------------------------------------------
// Direct strategy
// ---------------------------------------------------------------------------------------------

// Triton's direct example: 2 instances x max_batch_size 2 give four slots. Free slots go lowest
// slot first, then lowest instance: sequences 0 and 1 take slot 0 of instances 0 and 1, 2 and
// 3 take slot 1 of each. 4 and 5 wait in the backlog and, in FIFO order, take the slots of the
// first sequences whose END is batched (0 at 200 on instance 0, 3 at 301 on instance 1). Request
// j of sequence k arrives at 200 j + k; sequence lengths 2, 3, 3, 2, 2, 2; executions take 100.
TEST(sequence_batcher_direct, triton_direct_example) {
  rig<servekit::direct> r{direct_model(2), 2, latency(100)};
  const std::vector<int> lengths{2, 3, 3, 2, 2, 2};
  std::multimap<std::int64_t, servekit::request> arrivals;
  std::vector<std::string> all;
  for (int k = 0; k < 6; ++k) {
    for (int j = 0; j < lengths[static_cast<std::size_t>(k)]; ++j) {
      const int last = lengths[static_cast<std::size_t>(k)] - 1;
      const flags f = j == 0 ? flags::start : (j == last ? flags::end : flags::middle);
      std::string id = "s" + std::to_string(k) + "." + std::to_string(j);
      all.push_back(id);
      arrivals.emplace(200 * j + k, seq(std::move(id), static_cast<std::uint64_t>(100 + k), f));
    }
  }
  for (auto& [t, req] : arrivals) {
    r.submit(t, std::move(req));
  }
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"s0.0 0 SR"}},
                             {1, 1, {"s1.0 0 SR"}},
                             {0, 100, {"- 0", "s2.0 1 SR"}},
                             {1, 101, {"- 0", "s3.0 1 SR"}},
                             {0, 200, {"s0.1 0 ER"}}, // s4 takes instance 0 slot 0
                             {1, 201, {"s1.1 0 R"}},
                             {0, 300, {"s4.0 0 SR", "s2.1 1 R"}},
                             {1, 301, {"- 0", "s3.1 1 ER"}}, // s5 takes instance 1 slot 1
                             {0, 400, {"s4.1 0 ER"}},
                             {1, 401, {"s1.2 0 ER", "s5.0 1 SR"}},
                             {0, 500, {"- 0", "s2.2 1 ER"}},
                             {1, 501, {"- 0", "s5.1 1 ER"}},
                         }));
  r.expect_all_ok(all);
  EXPECT_EQ(r.only("s4.0").at_us, 400);
  EXPECT_EQ(r.only("s5.0").at_us, 501);
  EXPECT_TRUE(r.ended().empty());
}

// Slot 1 ready and slot 0 empty: the batch has two entries, slot 0 a padding entry. Statistics
// count the execution as batch size 2 but only the real request as an inference.
TEST(sequence_batcher_direct, empty_lower_slot_is_padding_and_counts_in_batch_size_only) {
  rig<servekit::direct> r{direct_model(2), 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(50, seq("b0", 2U, flags::start));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 100, {"- 0", "b0 1 SR"}},
                         }));
  ASSERT_EQ(r.sim.batches().size(), 2U);
  const auto& padded = r.sim.batches()[1];
  EXPECT_EQ(padded.elements, 2);
  EXPECT_EQ(padded.request_ids, (std::vector<std::string>{"", "b0"}));
  EXPECT_EQ(padded.sequence[0], (servekit::sequence_controls{false, false, false, 0}));
  r.expect_all_ok({"a0", "b0"});
  EXPECT_EQ(r.only("b0").at_us, 200);

  const auto stats = r.sim.statistics();
  EXPECT_EQ(stats.execution_count, 2U);
  EXPECT_EQ(stats.inference_count, 2U); // 1 + 1: padding is not an inference
  EXPECT_EQ(stats.success.count, 2U);
  ASSERT_NE(stats.batch_size(1), nullptr);
  EXPECT_EQ(stats.batch_size(1)->compute_infer.count, 1U);
  ASSERT_NE(stats.batch_size(2), nullptr); // the padded batch counts as size 2
  EXPECT_EQ(stats.batch_size(2)->compute_infer.count, 1U);
  ASSERT_EQ(stats.instances.size(), 1U);
  EXPECT_EQ(stats.instances[0].execution_count, 2U);
  EXPECT_EQ(stats.instances[0].inference_count, 2U);
  EXPECT_EQ(stats.pending_request_count, 0U);
}

/// A request of sequence `corr` whose INPUT is [1, length] FP32.
servekit::request shaped(std::string id, std::uint64_t corr, flags f, std::int64_t length) {
  auto r = seq(std::move(id), corr, f);
  r.inputs.push_back(
      servekit::make_tensor("INPUT", servekit::data_type::fp32, servekit::shape{1, length}));
  return r;
}

// INPUT is declared [-1] (not ragged): a slot whose request's shape differs from the first
// ready slot's is a padding entry, and its request runs in the next batch.
TEST(sequence_batcher_direct, shape_mismatch_slot_is_padding_and_runs_next) {
  auto settings = direct_model(3);
  const std::vector<servekit::tensor_config> inputs{
      {"INPUT", servekit::data_type::fp32, servekit::shape{-1}, false, false, false}};
  settings.compatibility = servekit::batch_compatibility{inputs, true};
  rig<servekit::direct> r{settings, 1, latency(100)};
  r.submit(0, shaped("a0", 1, flags::start, 4));  // slot 0
  r.submit(10, shaped("b0", 2, flags::start, 8)); // slot 1: a different length
  r.submit(20, shaped("c0", 3, flags::start, 4)); // slot 2
  r.submit(30, shaped("a1", 1, flags::end, 4));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 100, {"a1 0 ER", "- 1", "c0 2 SR"}},
                             {0, 200, {"- 0", "b0 1 SR"}},
                         }));
  ASSERT_EQ(r.sim.batches().size(), 3U);
  EXPECT_EQ(r.sim.batches()[1].reason, batch_close_reason::shape_mismatch);
  EXPECT_EQ(r.sim.batches()[1].request_ids, (std::vector<std::string>{"a1", "", "c0"}));
  r.expect_all_ok({"a0", "a1", "b0", "c0"});
  EXPECT_EQ(r.only("b0").at_us, 300);
}

// minimum_slot_utilization 0.75 of 4 slots with max_queue_delay_microseconds 1000: a batch runs
// as soon as 3 slots are ready, or when the oldest ready request has waited 1000 µs.
TEST(sequence_batcher_direct, minimum_slot_utilization_waits_for_slots_or_the_delay) {
  auto settings = direct_model(4);
  settings.sequence_batching.direct.minimum_slot_utilization = 0.75F;
  settings.sequence_batching.direct.max_queue_delay_microseconds = 1000;
  rig<servekit::direct> r{settings, 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(100, seq("b0", 2U, flags::start));
  r.submit(300, seq("c0", 3U, flags::start));   // third ready slot: run at once
  r.submit(1000, seq("a1", 1U, flags::middle)); // alone: waits the full delay
  r.submit(2500, seq("b1", 2U, flags::middle)); // oldest of two: the delay runs from 2500
  r.submit(3000, seq("c1", 3U, flags::middle));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 300, {"a0 0 SR", "b0 1 SR", "c0 2 SR"}},
                             {0, 2000, {"a1 0 R"}},
                             {0, 3500, {"- 0", "b1 1 R", "c1 2 R"}},
                         }));
  ASSERT_EQ(r.sim.batches().size(), 3U);
  EXPECT_EQ(r.sim.batches()[1].reason, batch_close_reason::queue_delay_expired);
  EXPECT_EQ(r.sim.batches()[2].reason, batch_close_reason::queue_delay_expired);
  r.expect_all_ok({"a0", "b0", "c0", "a1", "b1", "c1"});
}

// The utilization is honoured only together with a non-zero delay: without one, batches run at
// once.
TEST(sequence_batcher_direct, minimum_slot_utilization_without_delay_does_not_wait) {
  auto settings = direct_model(4);
  settings.sequence_batching.direct.minimum_slot_utilization = 0.75F;
  rig<servekit::direct> r{settings, 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(500, seq("a1", 1U, flags::end));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{{0, 0, {"a0 0 SR"}}, {0, 500, {"a1 0 ER"}}}));
}

// A second START for a live id restarts the sequence in its slot: the model sees START again,
// the sequence takes no new slot, and a new sequence still has to wait for a slot.
TEST(sequence_batcher_direct, restarted_sequence_keeps_its_slot_with_start_again) {
  rig<servekit::direct> r{direct_model(2), 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(10, seq("b0", 2U, flags::start));
  r.submit(250, seq("a1", 1U, flags::middle));
  r.submit(400, seq("a2", 1U, flags::start)); // restart
  r.submit(450, seq("c0", 3U, flags::start)); // both slots taken: backlog
  r.submit(600, seq("a3", 1U, flags::end));
  r.submit(600, seq("b1", 2U, flags::end));
  r.submit(800, seq("c1", 3U, flags::end));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 100, {"- 0", "b0 1 SR"}},
                             {0, 250, {"a1 0 R"}},
                             {0, 400, {"a2 0 SR"}},
                             {0, 600, {"a3 0 ER", "b1 1 ER"}},
                             {0, 700, {"c0 0 SR"}},
                             {0, 800, {"c1 0 ER"}},
                         }));
  r.expect_all_ok({"a0", "b0", "a1", "a2", "c0", "a3", "b1", "c1"});
  EXPECT_TRUE(r.ended().empty());
}

// An END batched while the other slot's sequence keeps running frees its slot at once for the
// oldest backlogged sequence.
TEST(sequence_batcher_direct, end_frees_its_slot_while_the_other_slot_keeps_running) {
  rig<servekit::direct> r{direct_model(2), 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(10, seq("b0", 2U, flags::start));
  r.submit(20, seq("c0", 3U, flags::start)); // backlog
  r.submit(150, seq("a1", 1U, flags::end));
  r.submit(160, seq("b1", 2U, flags::middle));
  r.submit(320, seq("b2", 2U, flags::middle));
  r.submit(450, seq("c1", 3U, flags::end));
  r.submit(450, seq("b3", 2U, flags::end));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 100, {"- 0", "b0 1 SR"}},
                             {0, 200, {"a1 0 ER", "b1 1 R"}}, // c takes slot 0
                             {0, 300, {"c0 0 SR"}},
                             {0, 400, {"- 0", "b2 1 R"}},
                             {0, 500, {"c1 0 ER", "b3 1 ER"}},
                         }));
  r.expect_all_ok({"a0", "b0", "c0", "a1", "b1", "b2", "c1", "b3"});
  EXPECT_TRUE(r.ended().empty());
}

// ---------------------------------------------------------------------------------------------
// Oldest strategy
// ---------------------------------------------------------------------------------------------

// Triton's oldest example: 1 instance, max_batch_size 2, 4 candidate sequences, preferred batch
// size 2. A, B, C, D send requests at the same rate (request j at 10 j + 0/1/2/3), faster than
// the model runs them (100 µs). Batches take the oldest requests, never two of one sequence:
// D's last two requests, queued together, run in separate batches.
TEST(sequence_batcher_oldest, triton_oldest_example) {
  rig<servekit::oldest> r{oldest_model(2, 4, {2}), 1, latency(100)};
  const std::vector<std::string> names{"A", "B", "C", "D"};
  const std::vector<int> lengths{3, 3, 3, 5};
  std::multimap<std::int64_t, servekit::request> arrivals;
  std::vector<std::string> all;
  for (std::size_t k = 0; k < names.size(); ++k) {
    for (int j = 0; j < lengths[k]; ++j) {
      const flags f = j == 0 ? flags::start : (j == lengths[k] - 1 ? flags::end : flags::middle);
      std::string id = names[k] + std::to_string(j);
      all.push_back(id);
      arrivals.emplace(10 * j + static_cast<std::int64_t>(k), seq(std::move(id), names[k], f));
    }
  }
  for (auto& [t, req] : arrivals) {
    r.submit(t, std::move(req));
  }
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"A0 0 SR"}},
                             {0, 100, {"B0 1 SR", "C0 2 SR"}},
                             {0, 200, {"D0 3 SR", "A1 0 R"}},
                             {0, 300, {"B1 1 R", "C1 2 R"}},
                             {0, 400, {"D1 3 R", "A2 0 ER"}},
                             {0, 500, {"B2 1 ER", "C2 2 ER"}},
                             {0, 600, {"D2 3 R"}},
                             {0, 700, {"D3 3 R"}},
                             {0, 800, {"D4 3 ER"}},
                         }));
  // The rule itself, batch by batch: no sequence twice, every entry ready.
  for (const auto& b : r.sim.batches()) {
    std::set<char> sequences;
    for (std::size_t k = 0; k < b.request_ids.size(); ++k) {
      ASSERT_FALSE(b.request_ids[k].empty());
      EXPECT_TRUE(sequences.insert(b.request_ids[k][0]).second)
          << "two requests of sequence " << b.request_ids[k][0] << " at " << us_of(b.start);
      EXPECT_TRUE(b.sequence[k].ready);
    }
  }
  r.expect_all_ok(all);
  EXPECT_TRUE(r.ended().empty());
}

// A restart under oldest: START again, same candidate slot.
TEST(sequence_batcher_oldest, restarted_sequence_keeps_its_slot_with_start_again) {
  rig<servekit::oldest> r{oldest_model(2, 2), 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(10, seq("b0", 2U, flags::start));
  r.submit(200, seq("a1", 1U, flags::start));
  r.submit(300, seq("a2", 1U, flags::end));
  r.submit(400, seq("b1", 2U, flags::end));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 100, {"b0 1 SR"}},
                             {0, 200, {"a1 0 SR"}},
                             {0, 300, {"a2 0 ER"}},
                             {0, 400, {"b1 1 ER"}},
                         }));
  EXPECT_TRUE(r.ended().empty());
}

// Cancelling a request that waits in the instance's batcher cancels the rest of its sequence
// and frees its candidate slot (no ended() notice: nothing of it executed).
TEST(sequence_batcher_oldest, cancelling_a_candidates_request_cancels_the_sequence) {
  rig<servekit::oldest> r{oldest_model(1, 2), 1, latency(100)};
  servekit::cancellation_source cb;
  r.submit(0, seq("a0", 1U, flags::start));
  auto b0 = seq("b0", 2U, flags::start);
  b0.cancellation = cb.token();
  r.submit(10, std::move(b0)); // candidate slot 1, waits in the batcher
  r.submit(20, seq("b1", 2U, flags::middle));
  r.sim.cancel_at(at_us(50), cb);
  r.submit(60, seq("c0", 3U, flags::start)); // the freed slot 1
  r.submit(70, seq("b2", 2U, flags::middle));
  r.submit(300, seq("a1", 1U, flags::end));
  r.submit(300, seq("c1", 3U, flags::end));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 100, {"c0 1 SR"}},
                             {0, 300, {"a1 0 ER"}},
                             {0, 400, {"c1 1 ER"}},
                         }));
  EXPECT_EQ(r.only("b0").code, cancelled_code);
  EXPECT_EQ(r.only("b0").at_us, 50);
  EXPECT_EQ(r.only("b1").code, cancelled_code);
  EXPECT_EQ(r.only("b1").at_us, 50);
  EXPECT_EQ(r.only("b2").code, invalid_arg_code);
  EXPECT_NE(r.only("b2").message.find(start_flag_error_tail), std::string::npos);
  r.expect_all_ok({"a0", "c0", "a1", "c1"});
  EXPECT_TRUE(r.ended().empty());
}

// ---------------------------------------------------------------------------------------------
// Backlog promotion: direct frees a slot when the END is batched, oldest when it has executed
// ---------------------------------------------------------------------------------------------

// One slot; a's END is batched at 100 and executes until 200; b waits in the backlog. Direct:
// b owns the slot from 100. Oldest: from 200. b0's timeout (deadline 170) tells them apart: a
// backlogged sequence times out, one holding a slot does not.
TEST(sequence_batcher_direct, end_batched_promotes_the_backlog_at_once) {
  rig<servekit::direct> r{direct_model(1), 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(10, seq("a1", 1U, flags::end));
  r.submit(20, seq("b0", 2U, flags::start, 150));
  r.sim.run_until(at_us(150));
  const auto& table = r.sim.core().table();
  EXPECT_EQ(table.backlogged_requests(), 0U);
  ASSERT_NE(table.owner(0, 0), servekit::detail::sequence_record::none);
  EXPECT_EQ(table.record(table.owner(0, 0)).id, servekit::correlation_id{2U});
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 100, {"a1 0 ER"}},
                             {0, 200, {"b0 0 SR"}},
                         }));
  r.expect_all_ok({"a0", "a1", "b0"});
}

TEST(sequence_batcher_oldest, end_executed_promotes_the_backlog) {
  rig<servekit::oldest> r{oldest_model(1), 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(10, seq("a1", 1U, flags::end));
  r.submit(20, seq("b0", 2U, flags::start, 150));
  r.submit(30, seq("c0", 3U, flags::start));
  r.sim.run_until(at_us(150));
  EXPECT_EQ(r.sim.core().table().backlogged_requests(), 2U); // b0 and c0: a1 has not executed
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 100, {"a1 0 ER"}},
                             {0, 200, {"c0 0 SR"}},
                         }));
  EXPECT_EQ(r.only("b0").code, unavailable_code);
  EXPECT_EQ(r.only("b0").message, sequence_timeout_message);
  EXPECT_EQ(r.only("b0").at_us, 170);
  r.expect_all_ok({"a0", "a1", "c0"});
}

// ---------------------------------------------------------------------------------------------
// Both strategies: idle expiry, errors, backlog timeouts, cancellation, hold hooks
// ---------------------------------------------------------------------------------------------

// max_sequence_idle_microseconds 1000: a sends nothing after 0, so at 1000 it loses its slot to
// the backlogged b (whose idle clock starts then), ended() says so, and a's next request, not a
// START, is refused. b in turn idles until 2000 and gives the slot to c.
TYPED_TEST(sequence_batcher_both, idle_sequence_gives_its_slot_to_the_backlog) {
  rig<TypeParam> r{model_for<TypeParam>(1, 1000), 1, latency(100)};
  r.submit(0, seq("a0", "a", flags::start));
  r.submit(50, seq("b0", "b", flags::start)); // backlog
  r.submit(1200, seq("a1", "a", flags::middle));
  r.submit(1500, seq("c0", "c", flags::start)); // backlog behind b
  r.submit(2500, seq("c1", "c", flags::end));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 1000, {"b0 0 SR"}},
                             {0, 2000, {"c0 0 SR"}},
                             {0, 2500, {"c1 0 ER"}},
                         }));
  EXPECT_EQ(r.ended(), (ends_t{
                           {0, 1000, "a", 0, sequence_end_reason::idle_timeout},
                           {0, 2000, "b", 0, sequence_end_reason::idle_timeout},
                       }));
  EXPECT_EQ(r.only("a1").code, invalid_arg_code);
  EXPECT_EQ(r.only("a1").at_us, 1200);
  EXPECT_EQ(r.only("a1").message,
            "inference request for sequence a to model 'm' " + start_flag_error_tail);
  r.expect_all_ok({"a0", "b0", "c0", "c1"});
}

// max_sequence_idle_microseconds 0 means 1 s.
TYPED_TEST(sequence_batcher_both, idle_zero_means_one_second) {
  rig<TypeParam> r{model_for<TypeParam>(1, 0), 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(50, seq("b0", 2U, flags::start));
  r.submit(999'999, seq("a1", 1U, flags::end)); // in time: a runs its END, no expiry
  r.submit(1'000'000, seq("c0", 3U, flags::start));
  r.submit(1'000'050, seq("b1", 2U, flags::end));
  r.submit(1'000'300, seq("c1", 3U, flags::end));
  r.sim.run();
  // b got the slot when a1 was batched (direct) or had executed (oldest), both by 1'000'099;
  // c then waits for b, whose idle time starts at its promotion; b's END arrives in time.
  const auto batches = r.batches();
  ASSERT_EQ(batches.size(), 6U);
  EXPECT_EQ(batches[0], (seen_batch{0, 0, {"a0 0 SR"}}));
  EXPECT_EQ(batches[1], (seen_batch{0, 999'999, {"a1 0 ER"}}));
  EXPECT_EQ(batches[2], (seen_batch{0, 1'000'099, {"b0 0 SR"}}));
  EXPECT_EQ(batches[3], (seen_batch{0, 1'000'199, {"b1 0 ER"}}));
  EXPECT_EQ(batches[4], (seen_batch{0, 1'000'299, {"c0 0 SR"}}));
  EXPECT_EQ(batches[5], (seen_batch{0, 1'000'399, {"c1 0 ER"}}));
  EXPECT_TRUE(r.ended().empty());
}

// The same with the default limit exceeded: a is reaped exactly 1 s after its last request.
TYPED_TEST(sequence_batcher_both, idle_zero_reaps_after_one_second) {
  rig<TypeParam> r{model_for<TypeParam>(1, 0), 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(50, seq("b0", 2U, flags::start));
  r.sim.run_until(at_us(999'999));
  EXPECT_EQ(r.sim.batches().size(), 1U);
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{{0, 0, {"a0 0 SR"}}, {0, 1'000'000, {"b0 0 SR"}}}));
  ASSERT_FALSE(r.ended().empty());
  EXPECT_EQ(r.ended()[0], (seen_end{0, 1'000'000, "1", 0, sequence_end_reason::idle_timeout}));
}

// Requests the sequence batcher refuses are answered at their arrival (the threaded model
// returns the status from submit instead).
TYPED_TEST(sequence_batcher_both, invalid_requests_are_refused_at_arrival) {
  rig<TypeParam> r{model_for<TypeParam>(2), 1, latency(100)};
  r.submit(10, seq("zero", std::uint64_t{0}, flags::start));
  r.submit(20, seq("empty", std::string{}, flags::start));
  r.submit(25, seq("unset", servekit::correlation_id{}, flags::start));
  r.submit(30, seq("two", 5U, flags::start), 2);
  r.submit(40, seq("unknown", 7U, flags::middle));
  r.submit(50, seq("unknown_end", "x", flags::end));
  r.sim.run();
  EXPECT_TRUE(r.sim.batches().empty());
  const std::string corr_error =
      "inference request to model 'm' must specify a non-zero or non-empty correlation ID";
  for (const auto& [id, at] : std::vector<std::pair<std::string, std::int64_t>>{
           {"zero", 10}, {"empty", 20}, {"unset", 25}}) {
    EXPECT_EQ(r.only(id).code, invalid_arg_code) << id;
    EXPECT_EQ(r.only(id).message, corr_error) << id;
    EXPECT_EQ(r.only(id).at_us, at) << id;
  }
  EXPECT_EQ(r.only("two").code, invalid_arg_code);
  EXPECT_EQ(r.only("two").message, "inference request to model 'm' must specify batch-size 1 due "
                                   "to requirements of sequence batcher");
  EXPECT_EQ(r.only("two").at_us, 30);
  EXPECT_EQ(r.only("unknown").code, invalid_arg_code);
  EXPECT_EQ(r.only("unknown").message,
            "inference request for sequence 7 to model 'm' " + start_flag_error_tail);
  EXPECT_EQ(r.only("unknown").at_us, 40);
  EXPECT_EQ(r.only("unknown_end").message,
            "inference request for sequence x to model 'm' " + start_flag_error_tail);
  EXPECT_EQ(r.sim.statistics().pending_request_count, 0U);
  EXPECT_EQ(r.sim.queued(), 0U);
}

// A request after END, without START, is for an unknown sequence.
TYPED_TEST(sequence_batcher_both, request_after_end_needs_a_new_start) {
  rig<TypeParam> r{model_for<TypeParam>(1), 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(10, seq("a1", 1U, flags::end));
  r.submit(20, seq("a2", 1U, flags::middle));
  r.submit(300, seq("a3", 1U, flags::start_end));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 100, {"a1 0 ER"}},
                             {0, 300, {"a3 0 SER"}},
                         }));
  EXPECT_EQ(r.only("a2").code, invalid_arg_code);
  EXPECT_EQ(r.only("a2").at_us, 20);
  r.expect_all_ok({"a0", "a1", "a3"});
}

// A backlogged sequence's earliest request timeout (b0: 20 + 500) expires it: all its queued
// requests are answered unavailable at 520 and its id is forgotten. a holds the slot and never
// times out (a1's 20 µs timeout is ignored); c, behind b in the backlog, gets a's slot.
TYPED_TEST(sequence_batcher_both, backlog_timeout_expires_the_whole_sequence) {
  rig<TypeParam> r{model_for<TypeParam>(1), 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(10, seq("a1", 1U, flags::middle, 20));
  r.submit(20, seq("b0", 2U, flags::start, 500));
  r.submit(25, seq("c0", 3U, flags::start));
  r.submit(30, seq("b1", 2U, flags::middle));
  r.submit(40, seq("b2", 2U, flags::middle, 1000));
  r.submit(600, seq("b3", 2U, flags::middle));
  r.submit(600, seq("a2", 1U, flags::end));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 100, {"a1 0 R"}},
                             {0, 600, {"a2 0 ER"}},
                             {0, 700, {"c0 0 SR"}},
                         }));
  for (const std::string id : {"b0", "b1", "b2"}) {
    EXPECT_EQ(r.only(id).code, unavailable_code) << id;
    EXPECT_EQ(r.only(id).message, sequence_timeout_message) << id;
    EXPECT_EQ(r.only(id).at_us, 520) << id;
  }
  EXPECT_EQ(r.only("b3").code, invalid_arg_code);
  EXPECT_EQ(r.only("b3").message,
            "inference request for sequence 2 to model 'm' " + start_flag_error_tail);
  r.expect_all_ok({"a0", "a1", "a2", "c0"});
  const auto stats = r.sim.statistics();
  EXPECT_EQ(stats.failed_by(servekit::failure_reason::rejected), 3U);
  EXPECT_EQ(stats.pending_request_count, 0U);
}

// Cancelling any request of a backlogged sequence cancels all of it.
TYPED_TEST(sequence_batcher_both, cancelling_a_backlogged_request_cancels_the_sequence) {
  rig<TypeParam> r{model_for<TypeParam>(1), 1, latency(100)};
  servekit::cancellation_source cb;
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(10, seq("b0", 2U, flags::start));
  auto b1 = seq("b1", 2U, flags::middle);
  b1.cancellation = cb.token();
  r.submit(20, std::move(b1));
  r.submit(30, seq("c0", 3U, flags::start));
  r.sim.cancel_at(at_us(50), cb);
  r.submit(60, seq("b2", 2U, flags::middle));
  r.submit(200, seq("a1", 1U, flags::end));
  r.submit(400, seq("c1", 3U, flags::end));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 200, {"a1 0 ER"}},
                             {0, 300, {"c0 0 SR"}},
                             {0, 400, {"c1 0 ER"}},
                         }));
  for (const std::string id : {"b0", "b1"}) {
    EXPECT_EQ(r.only(id).code, cancelled_code) << id;
    EXPECT_EQ(r.only(id).at_us, 50) << id;
  }
  EXPECT_EQ(r.only("b2").code, invalid_arg_code);
  EXPECT_NE(r.only("b2").message.find(start_flag_error_tail), std::string::npos);
  r.expect_all_ok({"a0", "a1", "c0", "c1"});
  EXPECT_TRUE(r.ended().empty());
  EXPECT_EQ(r.sim.statistics().failed_by(servekit::failure_reason::canceled), 2U);
}

// Hold hooks (TRITONSERVER_DELAY_SCHEDULER): no batch until 3 requests are queued.
TYPED_TEST(sequence_batcher_both, hold_until_queued_holds_the_first_batch) {
  auto settings = model_for<TypeParam>(2);
  settings.hold_until_queued = 3;
  rig<TypeParam> r{settings, 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(10, seq("b0", 2U, flags::start));
  r.submit(20, seq("a1", 1U, flags::end));
  r.submit(300, seq("b1", 2U, flags::end)); // the hold is over: runs at once
  r.sim.run();
  // Direct pads the freed slot 0; oldest batches only real requests.
  const bool direct = TypeParam::strategy == servekit::sequence_strategy::direct;
  const std::vector<std::string> last =
      direct ? std::vector<std::string>{"- 0", "b1 1 ER"} : std::vector<std::string>{"b1 1 ER"};
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 20, {"a0 0 SR", "b0 1 SR"}},
                             {0, 120, {"a1 0 ER"}},
                             {0, 300, last},
                         }));
  r.expect_all_ok({"a0", "b0", "a1", "b1"});
}

// TRITONSERVER_BACKLOG_DELAY_SCHEDULER: no batch until 2 requests wait in the backlog.
TYPED_TEST(sequence_batcher_both, hold_until_backlogged_holds_the_first_batch) {
  auto settings = model_for<TypeParam>(1);
  settings.hold_until_backlogged = 2;
  rig<TypeParam> r{settings, 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(10, seq("b0", 2U, flags::start));
  r.submit(20, seq("b1", 2U, flags::end));
  r.submit(30, seq("a1", 1U, flags::end));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 20, {"a0 0 SR"}},
                             {0, 120, {"a1 0 ER"}},
                             {0, 220, {"b0 0 SR"}},
                             {0, 320, {"b1 0 ER"}},
                         }));
  r.expect_all_ok({"a0", "b0", "a1", "b1"});
}

// A hold that can never be satisfied (its clients wait for answers before they send more) is
// released once no request arrived for the sequence idle timeout (1000 µs here): a0 and b0
// run at 1010, not never.
TYPED_TEST(sequence_batcher_both, a_hold_no_arrival_feeds_is_released_after_the_idle_timeout) {
  auto settings = model_for<TypeParam>(2, 1000);
  settings.hold_until_queued = 3;
  rig<TypeParam> r{settings, 1, latency(100)};
  r.submit(0, seq("a0", 1U, flags::start));
  r.submit(10, seq("b0", 2U, flags::start));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{{0, 1010, {"a0 0 SR", "b0 1 SR"}}}));
  r.expect_all_ok({"a0", "b0"});
}

// Triton's test_half_batch layout in virtual time: two instances with 2 slots each, DELAY 8,
// two interleaved 4-request sequences sent without waiting: the hold counts the requests of
// both instances, so the 8th arrival releases it and both sequences run (they hung when each
// instance counted only its own).
TYPED_TEST(sequence_batcher_both, the_hold_counts_the_requests_of_every_instance) {
  auto settings = model_for<TypeParam>(2);
  settings.hold_until_queued = 8;
  rig<TypeParam> r{settings, 2, latency(100)};
  std::vector<std::string> ids;
  for (int k = 0; k < 4; ++k) {
    for (std::uint64_t s = 1; s <= 2; ++s) {
      const std::string id = std::string(1, static_cast<char>('a' + s - 1)) + std::to_string(k);
      const auto f = k == 0 ? flags::start : (k == 3 ? flags::end : flags::middle);
      r.submit(static_cast<std::int64_t>(k * 2 + static_cast<int>(s)), seq(id, s, f));
      ids.push_back(id);
    }
  }
  r.sim.run();
  ASSERT_FALSE(r.batches().empty());
  EXPECT_EQ(r.batches().front().start_us, 8) << "the first batch waits for the 8th request";
  r.expect_all_ok(ids);
}

// Triton's test_backlog layout in virtual time: one instance with 4 slots, DELAY 12 and
// BACKLOG 3, five interleaved 3-request sequences (the fifth backlogged): the last arrival, a
// backlogged request, releases the hold and the four slot-bound sequences run at once.
TYPED_TEST(sequence_batcher_both, a_backlogged_arrival_can_release_the_hold) {
  auto settings = model_for<TypeParam>(4);
  settings.hold_until_queued = 12;
  settings.hold_until_backlogged = 3;
  rig<TypeParam> r{settings, 1, latency(100)};
  std::vector<std::string> ids;
  for (int k = 0; k < 3; ++k) {
    for (std::uint64_t s = 1; s <= 5; ++s) {
      const std::string id = std::string(1, static_cast<char>('a' + s - 1)) + std::to_string(k);
      const auto f = k == 0 ? flags::start : (k == 2 ? flags::end : flags::middle);
      r.submit(static_cast<std::int64_t>(k * 5 + static_cast<int>(s)), seq(id, s, f));
      ids.push_back(id);
    }
  }
  r.sim.run();
  ASSERT_FALSE(r.batches().empty());
  EXPECT_EQ(r.batches().front().start_us, 15) << "the first batch waits for the 15th request";
  r.expect_all_ok(ids);
}

// ---------------------------------------------------------------------------------------------
// Cancellation of slot-bound sequences (direct)
// ---------------------------------------------------------------------------------------------

// a executes a0 (0..100) with a1, a2 queued in its slot; cancelling a1 (its slot head) cancels
// a2 too, and a leaves slot 0 when a0 has executed: ended() says cancelled. b never executed:
// cancelling b0 frees slot 1 at once, without a notice. The backlog (c, then d) takes the slots
// in the order they were freed.
TEST(sequence_batcher_direct, cancelling_a_slot_bound_sequence_releases_its_slot) {
  rig<servekit::direct> r{direct_model(2), 1, latency(100)};
  servekit::cancellation_source ca;
  servekit::cancellation_source cb;
  r.submit(0, seq("a0", 1U, flags::start));
  auto a1 = seq("a1", 1U, flags::middle);
  a1.cancellation = ca.token();
  r.submit(10, std::move(a1));
  r.submit(20, seq("a2", 1U, flags::middle));
  auto b0 = seq("b0", 2U, flags::start);
  b0.cancellation = cb.token();
  r.submit(30, std::move(b0));               // slot 1
  r.submit(40, seq("c0", 3U, flags::start)); // backlog
  r.submit(45, seq("d0", 4U, flags::start)); // backlog
  r.sim.cancel_at(at_us(50), ca);
  r.sim.cancel_at(at_us(60), cb); // c takes slot 1 now
  r.submit(300, seq("a3", 1U, flags::middle));
  r.submit(300, seq("c1", 3U, flags::end));
  r.submit(300, seq("d1", 4U, flags::end));
  r.sim.run();
  EXPECT_EQ(r.batches(), (batches_t{
                             {0, 0, {"a0 0 SR"}},
                             {0, 100, {"d0 0 SR", "c0 1 SR"}},
                             {0, 300, {"d1 0 ER", "c1 1 ER"}},
                         }));
  EXPECT_EQ(r.only("a1").code, cancelled_code);
  EXPECT_EQ(r.only("a1").at_us, 50);
  EXPECT_EQ(r.only("a2").code, cancelled_code);
  EXPECT_EQ(r.only("a2").at_us, 50);
  EXPECT_EQ(r.only("b0").code, cancelled_code);
  EXPECT_EQ(r.only("b0").at_us, 60);
  EXPECT_EQ(r.only("a3").code, invalid_arg_code);
  r.expect_all_ok({"a0", "c0", "d0", "c1", "d1"});
  EXPECT_EQ(r.only("a0").at_us, 100);
  EXPECT_EQ(r.ended(), (ends_t{{0, 100, "1", 0, sequence_end_reason::cancelled}}));
}

} // namespace sequence_batcher_test
