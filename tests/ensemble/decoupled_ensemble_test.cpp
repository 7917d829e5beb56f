// Ensembles with decoupled steps (Triton §2.4): every response of a decoupled step is an
// iteration; the steps below it run once per iteration, each complete set of requested outputs
// is one streamed ensemble response, and the final flag comes when no step is left in flight.
// Both forms (ensemble<...> and runtime_ensemble). Threads are coordinated by futures; nothing
// sleeps to wait for a timing rule.
#include "pipeline_backends.hpp"

#include <servekit/config/model_config_json.hpp>
#include <servekit/ensemble/ensemble.hpp>
#include <servekit/ensemble/runtime_ensemble.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_registry.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace decoupled_ensemble_test {

using namespace ensemble_tests;
using namespace std::chrono_literals;
using servekit::in;
using servekit::out;
using servekit::status_code;
using servekit::step;

/// A decoupled backend: for each request it sends `count` partial responses during execute,
/// response k being `in + Step * k`, then the model sends its (empty) final response. With
/// `fail_final` the final response is an error instead.
template <servekit::fixed_string In, servekit::fixed_string Out, int Step>
struct stream_backend {
  static constexpr bool decoupled = true;
  static constexpr std::int32_t max_batch_size = 0;
  static constexpr servekit::tensor_declaration inputs[] = {{In.view(), data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{Out.view(), data_type::fp32, {4}}};

  static inline std::atomic<int> count{3};           // NOLINT: test-only
  static inline std::atomic<bool> fail_final{false}; // NOLINT: test-only
  static void reset() {
    count = 3;
    fail_final = false;
  }

  explicit stream_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::tensor& x = *b.request(i).find_input(In.view());
      for (int k = 0; k < count; ++k) {
        servekit::response r;
        auto& y = r.add_output(std::string{Out.view()}, data_type::fp32, x.shape);
        std::transform(x.values<float>().begin(), x.values<float>().end(),
                       y.values<float>().begin(),
                       [k](float v) { return v + static_cast<float>(Step * k); });
        (void)b.send_partial(i, std::move(r));
      }
      if (fail_final) {
        b.response(i).status = servekit::internal_error("stream broke");
      }
    }
  }
};

/// SUM = A + B, element-wise (to read a streamed tensor and a per-request one together).
struct add_backend {
  static constexpr std::int32_t max_batch_size = 0;
  static constexpr servekit::tensor_declaration inputs[] = {{"A", data_type::fp32, {4}},
                                                            {"B", data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"SUM", data_type::fp32, {4}}};
  explicit add_backend(const servekit::instance_context&) {}
  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& a = *b.request(i).find_input("A");
      const auto& c = *b.request(i).find_input("B");
      auto& s = b.response(i).add_output("SUM", data_type::fp32, a.shape);
      for (std::size_t k = 0; k < s.values<float>().size(); ++k) {
        s.values<float>()[k] = a.values<float>()[k] + c.values<float>()[k];
      }
    }
  }
};

using stream_a_backend = stream_backend<"IN", "OUT", 1>;
using stream_b_backend = stream_backend<"IN", "OUT", 10>;
using double_backend = unary_backend<times_two, "X", "Y", 0>;

using stream_a = servekit::model<stream_a_backend>;
using stream_b = servekit::model<stream_b_backend>;
using doubler = servekit::model<double_backend>; // one instance, no batching: FIFO
using adder = servekit::model<add_backend>;

servekit::model_options named(const char* name, bool decoupled = false) {
  servekit::model_options o;
  o.name = name;
  if (decoupled) {
    o.model_transaction_policy = servekit::model_transaction_policy_options{};
    o.model_transaction_policy->decoupled = true;
  }
  return o;
}

/// stream -> doubler: N partials give N responses (in + k) * 2.
using streaming = servekit::ensemble<servekit::inputs<"TEXT">, servekit::outputs<"RESULT">,
                                     step<stream_a, in<"IN", "TEXT">, out<"OUT", "token">>,
                                     step<doubler, in<"X", "token">, out<"Y", "RESULT">>>;
static_assert(streaming::traits::decoupled);

/// Every response a request got, in order, and the final one.
struct collected {
  std::mutex mutex;
  std::vector<servekit::response> responses;
  std::promise<void> finished;

  servekit::response_sink sink() {
    return [this](servekit::response&& r) {
      const bool last = r.final;
      {
        std::lock_guard lock{mutex};
        responses.push_back(std::move(r));
      }
      if (last) {
        finished.set_value();
      }
    };
  }
  void wait() { ASSERT_EQ(finished.get_future().wait_for(10s), std::future_status::ready); }
  /// The first value of `output` in each response that has it.
  std::vector<float> values(const char* output) {
    std::vector<float> out;
    for (const auto& r : responses) {
      if (r.find_output(output) != nullptr) {
        out.push_back(first_value(r, output));
      }
    }
    return out;
  }
};

servekit::request text(float value, std::string id = "r") {
  servekit::request r;
  r.id = std::move(id);
  auto t = servekit::make_tensor("TEXT", data_type::fp32, shape{4});
  std::fill(t.values<float>().begin(), t.values<float>().end(), value);
  r.inputs.push_back(std::move(t));
  return r;
}

/// Exactly one final response, the last one, and every other one ok and not final.
void expect_one_final_last(const collected& c) {
  ASSERT_FALSE(c.responses.empty());
  for (std::size_t i = 0; i + 1 < c.responses.size(); ++i) {
    EXPECT_FALSE(c.responses[i].final) << i;
    EXPECT_TRUE(c.responses[i].ok()) << c.responses[i].status.message();
  }
  EXPECT_TRUE(c.responses.back().final);
}

class Decoupled : public ::testing::Test {
protected:
  void SetUp() override { reset(); }
  void TearDown() override { reset(); }
  static void reset() {
    stream_a_backend::reset();
    stream_b_backend::reset();
    double_backend::reset();
  }
};

TEST_F(Decoupled, EveryPartialOfTheStepIsOneEnsembleResponseInOrderThenTheFinal) {
  stream_a s{named("stream", true)};
  doubler d{named("double")};
  streaming e{{.name = "streaming"}, s, d};
  EXPECT_TRUE(e.decoupled());

  collected c;
  ASSERT_TRUE(e.submit(text(5.0F, "q"), c.sink()).ok());
  c.wait();
  EXPECT_EQ(c.values("RESULT"), (std::vector<float>{10.0F, 12.0F, 14.0F}));
  expect_one_final_last(c);
  EXPECT_TRUE(c.responses.back().ok());
  for (const auto& r : c.responses) {
    EXPECT_EQ(r.id, "q");
  }

  // Statistics: one ensemble request, one request of the decoupled step, three of the next.
  e.shutdown(servekit::shutdown_mode::drain);
  const auto stats = e.statistics();
  EXPECT_EQ(stats.success.count, 1U);
  EXPECT_EQ(stats.fail.count, 0U);
  ASSERT_EQ(stats.steps.size(), 2U);
  EXPECT_EQ(stats.steps[0].success.count, 1U);
  EXPECT_EQ(stats.steps[1].success.count, 3U);
  EXPECT_EQ(stats.pending_request_count, 0U);
}

TEST_F(Decoupled, ManyRequestsAtOnceEachGetTheirOwnStream) {
  stream_a s{named("stream", true)};
  doubler d{named("double")};
  streaming e{{.name = "streaming"}, s, d};
  constexpr std::size_t requests = 20;
  std::vector<collected> all(requests);
  for (std::size_t i = 0; i < requests; ++i) {
    ASSERT_TRUE(e.submit(text(static_cast<float>(100 * i), std::to_string(i)), all[i].sink()).ok());
  }
  for (std::size_t i = 0; i < requests; ++i) {
    all[i].wait();
    const float base = static_cast<float>(200 * i);
    EXPECT_EQ(all[i].values("RESULT"), (std::vector<float>{base, base + 2, base + 4}));
    expect_one_final_last(all[i]);
  }
  e.shutdown(servekit::shutdown_mode::drain);
  EXPECT_EQ(e.statistics().success.count, requests);
}

TEST_F(Decoupled, ZeroPartialsGiveJustAnEmptyFinalResponse) {
  stream_a_backend::count = 0;
  stream_a s{named("stream", true)};
  doubler d{named("double")};
  streaming e{{.name = "streaming"}, s, d};
  collected c;
  ASSERT_TRUE(e.submit(text(1.0F), c.sink()).ok());
  c.wait();
  ASSERT_EQ(c.responses.size(), 1U); // a requested output never produced: final flag only
  EXPECT_TRUE(c.responses[0].final);
  EXPECT_TRUE(c.responses[0].ok());
  EXPECT_TRUE(c.responses[0].outputs.empty());
  e.shutdown(servekit::shutdown_mode::drain);
  EXPECT_EQ(e.statistics().steps[1].success.count, 0U);
}

TEST_F(Decoupled, AStepErrorMidStreamEndsWithOneErrorAfterWhatWasStreamed) {
  double_backend::before = [](servekit::batch& b) {
    if (b.request(0).find_input("X")->values<float>()[0] == 6.0F) { // iteration 1 of 3
      throw std::runtime_error("cannot double six");
    }
  };
  stream_a s{named("stream", true)};
  doubler d{named("double")};
  streaming e{{.name = "streaming"}, s, d};
  collected c;
  ASSERT_TRUE(e.submit(text(5.0F), c.sink()).ok());
  c.wait();
  ASSERT_EQ(c.responses.size(), 2U);
  EXPECT_EQ(first_value(c.responses[0], "RESULT"), 10.0F); // already streamed: stays sent
  EXPECT_FALSE(c.responses[0].final);
  const auto& last = c.responses[1];
  EXPECT_TRUE(last.final);
  EXPECT_FALSE(last.ok());
  EXPECT_TRUE(last.outputs.empty());
  EXPECT_NE(last.status.message().find("in ensemble 'streaming', step 1 (model 'double')"),
            std::string::npos)
      << last.status.message();
  EXPECT_NE(last.status.message().find("cannot double six"), std::string::npos);
  e.shutdown(servekit::shutdown_mode::drain);
  EXPECT_EQ(e.statistics().fail.count, 1U);
}

TEST_F(Decoupled, AnErrorFinalOfTheDecoupledStepFailsTheRequest) {
  stream_a_backend::count = 0;
  stream_a_backend::fail_final = true;
  stream_a s{named("stream", true)};
  doubler d{named("double")};
  streaming e{{.name = "streaming"}, s, d};
  collected c;
  ASSERT_TRUE(e.submit(text(5.0F), c.sink()).ok());
  c.wait();
  ASSERT_EQ(c.responses.size(), 1U);
  EXPECT_FALSE(c.responses[0].ok());
  EXPECT_NE(c.responses[0].status.message().find(
                "in ensemble 'streaming', step 0 (model 'stream'): stream broke"),
            std::string::npos)
      << c.responses[0].status.message();
}

/// A per-request tensor (the ensemble input) is read with every iteration of the stream.
using with_input =
    servekit::ensemble<servekit::inputs<"TEXT">, servekit::outputs<"SUM">,
                       step<stream_a, in<"IN", "TEXT">, out<"OUT", "token">>,
                       step<adder, in<"A", "token">, in<"B", "TEXT">, out<"SUM", "SUM">>>;

TEST_F(Decoupled, APerRequestTensorJoinsEveryIteration) {
  stream_a s{named("stream", true)};
  adder a{named("add")};
  with_input e{{.name = "with_input"}, s, a};
  collected c;
  ASSERT_TRUE(e.submit(text(5.0F), c.sink()).ok());
  c.wait();
  EXPECT_EQ(c.values("SUM"), (std::vector<float>{10.0F, 11.0F, 12.0F})); // (5 + k) + 5
  expect_one_final_last(c);
}

/// A decoupled step below another: each response of the first opens a stream of the second.
using nested_streams = servekit::ensemble<servekit::inputs<"TEXT">, servekit::outputs<"RESULT">,
                                          step<stream_a, in<"IN", "TEXT">, out<"OUT", "token">>,
                                          step<stream_b, in<"IN", "token">, out<"OUT", "subtoken">>,
                                          step<doubler, in<"X", "subtoken">, out<"Y", "RESULT">>>;

TEST_F(Decoupled, StreamsNest) {
  stream_a_backend::count = 2;
  stream_b_backend::count = 2;
  stream_a s{named("stream", true)};
  stream_b t{named("substream", true)};
  doubler d{named("double")};
  nested_streams e{{.name = "nested"}, s, t, d};
  collected c;
  ASSERT_TRUE(e.submit(text(1.0F), c.sink()).ok());
  c.wait();
  auto got = c.values("RESULT");
  std::sort(got.begin(), got.end());
  // (1 + a + 10 b) * 2 for a, b in {0, 1}
  EXPECT_EQ(got, (std::vector<float>{2.0F, 4.0F, 22.0F, 24.0F}));
  expect_one_final_last(c);
  e.shutdown(servekit::shutdown_mode::drain);
  EXPECT_EQ(e.statistics().steps[1].success.count, 2U);
  EXPECT_EQ(e.statistics().steps[2].success.count, 4U);
}

/// A decoupled ensemble is a decoupled step of another.
using outer = servekit::ensemble<servekit::inputs<"TEXT">, servekit::outputs<"FINAL">,
                                 step<streaming, in<"TEXT", "TEXT">, out<"RESULT", "r">>,
                                 step<doubler, in<"X", "r">, out<"Y", "FINAL">>>;
static_assert(outer::traits::decoupled);

TEST_F(Decoupled, ADecoupledEnsembleIsADecoupledStep) {
  stream_a s{named("stream", true)};
  doubler d{named("double")};
  doubler d2{named("double2")};
  streaming inner{{.name = "inner"}, s, d};
  outer e{{.name = "outer"}, inner, d2};
  collected c;
  ASSERT_TRUE(e.submit(text(5.0F), c.sink()).ok());
  c.wait();
  auto got = c.values("FINAL");
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<float>{20.0F, 24.0F, 28.0F}));
  expect_one_final_last(c);
}

/// Two independent streams feeding one step cannot be paired: refused when built.
using two_streams = servekit::ensemble<servekit::inputs<"TEXT">, servekit::outputs<"SUM">,
                                       step<stream_a, in<"IN", "TEXT">, out<"OUT", "a">>,
                                       step<stream_b, in<"IN", "TEXT">, out<"OUT", "b">>,
                                       step<adder, in<"A", "a">, in<"B", "b">, out<"SUM", "SUM">>>;

TEST_F(Decoupled, TwoIndependentStreamsIntoOneStepAreRefused) {
  stream_a s{named("stream", true)};
  stream_b t{named("substream", true)};
  adder a{named("add")};
  try {
    two_streams e{{.name = "two"}, s, t, a};
    FAIL() << "built an ensemble pairing two independent streams";
  } catch (const servekit::config_error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("/ensemble_scheduling/step/2"), std::string::npos) << what;
    EXPECT_NE(what.find("two independent decoupled steps"), std::string::npos) << what;
    EXPECT_NE(what.find("model 'stream'"), std::string::npos) << what;
    EXPECT_NE(what.find("model 'substream'"), std::string::npos) << what;
  }
}

constexpr const char* streaming_config = R"({
  "name": "streaming",
  "platform": "ensemble",
  "input": [{"name": "TEXT", "data_type": "TYPE_FP32", "dims": [4]}],
  "output": [{"name": "RESULT", "data_type": "TYPE_FP32", "dims": [4]}],
  "ensemble_scheduling": {
    "step": [
      {"model_name": "stream", "input_map": {"IN": "TEXT"}, "output_map": {"OUT": "token"}},
      {"model_name": "double", "input_map": {"X": "token"}, "output_map": {"Y": "RESULT"}}
    ]
  }
})";

TEST_F(Decoupled, TheConfiguredFormStreamsTheSame) {
  stream_a s{named("stream", true)};
  doubler d{named("double")};
  servekit::model_registry registry;
  registry.add(s);
  registry.add(d);
  servekit::runtime_ensemble e{servekit::load_model_config(streaming_config), registry};
  EXPECT_TRUE(e.decoupled());
  collected c;
  ASSERT_TRUE(e.submit(text(5.0F), c.sink()).ok());
  c.wait();
  EXPECT_EQ(c.values("RESULT"), (std::vector<float>{10.0F, 12.0F, 14.0F}));
  expect_one_final_last(c);
}

TEST_F(Decoupled, ANonDecoupledEnsembleStillAnswersOnce) {
  doubler d{named("double")};
  doubler d2{named("double2")};
  using plain = servekit::ensemble<servekit::inputs<"TEXT">, servekit::outputs<"R">,
                                   step<doubler, in<"X", "TEXT">, out<"Y", "t">>,
                                   step<doubler, in<"X", "t">, out<"Y", "R">>>;
  static_assert(!plain::traits::decoupled);
  plain e{{.name = "plain"}, d, d2};
  EXPECT_FALSE(e.decoupled());
  collected c;
  ASSERT_TRUE(e.submit(text(5.0F), c.sink()).ok());
  c.wait();
  ASSERT_EQ(c.responses.size(), 1U);
  EXPECT_EQ(first_value(c.responses[0], "R"), 20.0F);
}

} // namespace decoupled_ensemble_test
