// The compile-time ensemble at run time: data flow, pruning, intermediate tensors moved (never
// copied), batching inside steps, failures, backpressure, cancellation, request fields passed
// down to the steps, statistics, nesting, shutdown. Threads are coordinated with gates and
// futures; nothing sleeps to wait for a timing rule.
#include "archetypes/gate.hpp"
#include "pipeline_backends.hpp"

#include <servekit/ensemble/ensemble.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/state/host_state_store.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ensemble_test {

using namespace ensemble_tests;
using namespace std::chrono_literals;
using archetypes::gate;
using servekit::in;
using servekit::out;
using servekit::status_code;
using servekit::step;

using pre_backend = unary_backend<plus_one, "RAW_IMAGE", "PREPROCESSED_OUTPUT">;
using cls_backend = unary_backend<times_two, "FORMATTED_IMAGE", "CLASSIFICATION_OUTPUT">;
using seg_backend = unary_backend<times_three, "FORMATTED_IMAGE", "SEGMENTATION_OUTPUT">;

using preprocess = servekit::model<pre_backend, servekit::dynamic_batcher<>>;
using classify = servekit::model<cls_backend, servekit::dynamic_batcher<>>;
using segment =
    servekit::model<seg_backend, servekit::dynamic_batcher<>, servekit::instance_group<2>>;

using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"CLASSIFICATION", "SEGMENTATION">,
    step<preprocess, in<"RAW_IMAGE", "IMAGE">, out<"PREPROCESSED_OUTPUT", "preprocessed_image">>,
    step<classify, in<"FORMATTED_IMAGE", "preprocessed_image">,
         out<"CLASSIFICATION_OUTPUT", "CLASSIFICATION">>,
    step<segment, in<"FORMATTED_IMAGE", "preprocessed_image">,
         out<"SEGMENTATION_OUTPUT", "SEGMENTATION">>>;

servekit::model_options named(const char* name, std::uint64_t delay_us = 0) {
  servekit::model_options o;
  o.name = name;
  servekit::dynamic_batching_options d;
  d.max_queue_delay_microseconds = delay_us;
  o.dynamic_batching = d;
  return o;
}

/// The three composing models and the pipeline over them, hooks reset around each test.
class Pipeline : public ::testing::Test {
protected:
  void SetUp() override { reset(); }
  void TearDown() override {
    p.shutdown(servekit::shutdown_mode::drain);
    reset();
  }
  static void reset() {
    pre_backend::reset();
    cls_backend::reset();
    seg_backend::reset();
  }

  preprocess pre{named("preprocess")};
  classify cls{named("classify")};
  segment seg{named("segment")};
  pipeline p{{.name = "pipeline"}, pre, cls, seg};
};

TEST_F(Pipeline, RunsEveryStepAndAnswersWithTheOutputs) {
  auto r = p.infer(make_request("IMAGE", 1.0F)).get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(first_value(r, "CLASSIFICATION"), 4.0F); // (1 + 1) * 2
  EXPECT_EQ(first_value(r, "SEGMENTATION"), 6.0F);   // (1 + 1) * 3
  EXPECT_EQ(r.id, "r");
  EXPECT_EQ(r.outputs.size(), 2U);
  EXPECT_EQ(r.find_output("CLASSIFICATION")->shape, (shape{1, 4}));
}

TEST_F(Pipeline, InferSyncWaitsForTheWholePipeline) {
  const servekit::response r = p.infer_sync(make_request("IMAGE", 2.0F));
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(first_value(r, "CLASSIFICATION"), 6.0F); // (2 + 1) * 2
  EXPECT_EQ(first_value(r, "SEGMENTATION"), 9.0F);   // (2 + 1) * 3
}

TEST_F(Pipeline, RunsOnlyTheStepsTheRequestedOutputsNeed) {
  auto req = make_request("IMAGE", 1.0F);
  req.requested_outputs = {"CLASSIFICATION"};
  auto r = p.infer(std::move(req)).get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(first_value(r, "CLASSIFICATION"), 4.0F);
  EXPECT_EQ(r.find_output("SEGMENTATION"), nullptr);
  EXPECT_EQ(seg.statistics().execution_count, 0U);
  EXPECT_EQ(cls.statistics().execution_count, 1U);
  const auto stats = p.statistics();
  EXPECT_EQ(stats.steps[2].success.count, 0U);
  EXPECT_EQ(stats.steps[1].success.count, 1U);
}

TEST_F(Pipeline, MovesIntermediateTensorsAndSharesAFannedOutOneWithoutCopying) {
  std::mutex m;
  const std::byte* produced = nullptr;
  std::vector<const std::byte*> read;
  const std::byte* given = nullptr;
  pre_backend::before = [&](servekit::batch& b) {
    const std::lock_guard lock{m};
    read.push_back(b.request(0).find_input("RAW_IMAGE")->data.data());
  };
  pre_backend::after = [&](servekit::batch& b) {
    const std::lock_guard lock{m};
    produced = b.response(0).find_output("PREPROCESSED_OUTPUT")->data.data();
  };
  const auto record_input = [&](servekit::batch& b) {
    const std::lock_guard lock{m};
    read.push_back(b.request(0).find_input("FORMATTED_IMAGE")->data.data());
  };
  cls_backend::before = record_input;
  seg_backend::before = record_input;

  auto req = make_request("IMAGE", 1.0F);
  given = req.inputs[0].data.data();
  auto r = p.infer(std::move(req)).get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  ASSERT_EQ(read.size(), 3U);
  EXPECT_EQ(read[0], given);    // the client's input reached the first step itself
  EXPECT_EQ(read[1], produced); // both readers of the fanned-out tensor see the producer's bytes
  EXPECT_EQ(read[2], produced);
}

TEST_F(Pipeline, BatchesConcurrentEnsembleRequestsInsideAStep) {
  gate hold;
  std::atomic<int> held{0};
  pre_backend::before = [&](servekit::batch&) {
    if (held.fetch_add(1) == 0) {
      EXPECT_TRUE(hold.wait()); // the first execution holds preprocess: the rest queue up
    }
  };
  std::vector<std::future<servekit::response>> futures;
  futures.push_back(p.infer(make_request("IMAGE", 1.0F, 1, "first")));
  while (pre.statistics().pending_request_count != 0) {
    std::this_thread::yield(); // until the first request is executing
  }
  for (int i = 0; i < 6; ++i) {
    futures.push_back(p.infer(make_request("IMAGE", static_cast<float>(i), 1, std::to_string(i))));
  }
  while (pre.statistics().pending_request_count != 6) {
    std::this_thread::yield();
  }
  hold.open();
  for (auto& f : futures) {
    auto r = f.get();
    EXPECT_TRUE(r.ok()) << r.status.message();
  }
  // The six queued requests went through preprocess as one batch.
  const auto stats = pre.statistics();
  ASSERT_NE(stats.batch_size(6), nullptr);
  EXPECT_EQ(stats.batch_size(6)->compute_infer.count, 1U);
}

TEST_F(Pipeline, AFailingStepFailsTheRequestNamingEnsembleStepAndModel) {
  cls_backend::before = [](servekit::batch&) { throw std::runtime_error("weights are corrupt"); };
  auto r = p.infer(make_request("IMAGE", 1.0F)).get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status.code(), status_code::internal);
  const auto& msg = r.status.message();
  EXPECT_NE(msg.find("in ensemble 'pipeline', step 1 (model 'classify')"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("weights are corrupt"), std::string::npos) << msg;
  EXPECT_TRUE(r.outputs.empty());
  const auto stats = p.statistics();
  EXPECT_EQ(stats.fail.count, 1U);
  EXPECT_EQ(stats.failed_by(servekit::failure_reason::other), 1U);
  EXPECT_EQ(stats.steps[1].fail.count, 1U);
}

TEST_F(Pipeline, AFailedStepStartsNothingNewAndRunningStepsFinishFirst) {
  // preprocess fails: neither branch starts.
  pre_backend::before = [](servekit::batch&) { throw std::runtime_error("bad image"); };
  auto r = p.infer(make_request("IMAGE", 1.0F)).get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(cls.statistics().execution_count, 0U);
  EXPECT_EQ(seg.statistics().execution_count, 0U);

  // classify fails while segment is still running: the one response waits for segment.
  pre_backend::before = nullptr;
  gate segment_running;
  gate release_segment;
  std::atomic<bool> segment_done{false};
  seg_backend::before = [&](servekit::batch&) {
    segment_running.open();
    EXPECT_TRUE(release_segment.wait());
  };
  seg_backend::after = [&](servekit::batch&) { segment_done = true; };
  cls_backend::before = [&](servekit::batch&) {
    EXPECT_TRUE(segment_running.wait());
    throw std::runtime_error("classifier failed");
  };
  auto f = p.infer(make_request("IMAGE", 1.0F));
  EXPECT_EQ(f.wait_for(50ms), std::future_status::timeout); // segment still holds it
  release_segment.open();
  auto r2 = f.get();
  EXPECT_TRUE(segment_done);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status.message().find("classifier failed"), std::string::npos);
}

TEST_F(Pipeline, ARequestedOutputNoStepProducedIsAnErrorNamingIt) {
  seg_backend::omit_output = true;
  auto r = p.infer(make_request("IMAGE", 1.0F)).get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status.code(), status_code::invalid_argument);
  EXPECT_NE(r.status.message().find("output 'SEGMENTATION' was not produced: step 2 (model "
                                    "'segment') did not return output 'SEGMENTATION_OUTPUT'"),
            std::string::npos)
      << r.status.message();

  // One missing intermediate: the chain names where it broke.
  seg_backend::omit_output = false;
  pre_backend::omit_output = true;
  auto r2 = p.infer(make_request("IMAGE", 1.0F)).get();
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status.message().find("step 1 (model 'classify') did not run: tensor "
                                     "'preprocessed_image' was not produced: step 0 (model "
                                     "'preprocess') did not return output 'PREPROCESSED_OUTPUT'"),
            std::string::npos)
      << r2.status.message();
}

TEST_F(Pipeline, RejectsBadInputAtSubmitNamingIt) {
  servekit::response_sink sink = [](servekit::response&&) { FAIL() << "a rejected request"; };
  auto wrong_name = make_request("PICTURE", 1.0F);
  auto s = p.submit(std::move(wrong_name), std::move(sink));
  EXPECT_EQ(s.code(), status_code::invalid_argument);
  EXPECT_NE(s.message().find("'PICTURE'"), std::string::npos) << s.message();

  servekit::request wrong_type;
  wrong_type.inputs.push_back(servekit::make_tensor("IMAGE", data_type::int32, shape{1, 4}));
  s = p.submit(std::move(wrong_type), [](servekit::response&&) {});
  EXPECT_EQ(s.code(), status_code::invalid_argument);
  EXPECT_NE(s.message().find("'IMAGE'"), std::string::npos) << s.message();

  auto unknown_output = make_request("IMAGE", 1.0F);
  unknown_output.requested_outputs = {"DEPTH"};
  s = p.submit(std::move(unknown_output), [](servekit::response&&) {});
  EXPECT_EQ(s.code(), status_code::invalid_argument);
  EXPECT_NE(s.message().find("'DEPTH'"), std::string::npos) << s.message();
}

TEST_F(Pipeline, KeepsStatisticsPerEnsembleAndPerStep) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(p.infer(make_request("IMAGE", 1.0F)).get().ok());
  }
  const auto s = p.statistics();
  EXPECT_EQ(s.success.count, 5U);
  EXPECT_EQ(s.inference_count, 5U);
  EXPECT_EQ(s.queue.count, 5U);
  EXPECT_GT(s.compute_infer.ns, 0U);
  ASSERT_EQ(s.steps.size(), 3U);
  EXPECT_EQ(s.steps[0].model_name, "preprocess");
  EXPECT_EQ(s.steps[2].model_name, "segment");
  for (const auto& st : s.steps) {
    EXPECT_EQ(st.success.count, 5U);
    EXPECT_EQ(st.queue.count, 5U);
    EXPECT_EQ(st.compute_infer.count, 5U);
    EXPECT_GT(st.compute_infer.ns, 0U);
    EXPECT_GE(st.success.ns, st.compute_infer.ns);
  }
  EXPECT_EQ(s.pending_request_count, 0U);
}

TEST_F(Pipeline, ComposingModelsServeTheirOwnClientsAtTheSameTime) {
  std::vector<std::future<servekit::response>> direct;
  std::vector<std::future<servekit::response>> through;
  for (int i = 0; i < 50; ++i) {
    through.push_back(p.infer(make_request("IMAGE", 1.0F)));
    direct.push_back(cls.infer(make_request("FORMATTED_IMAGE", 5.0F)));
  }
  for (auto& f : through) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status.message();
    EXPECT_EQ(first_value(r, "CLASSIFICATION"), 4.0F);
  }
  for (auto& f : direct) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status.message();
    EXPECT_EQ(first_value(r, "CLASSIFICATION_OUTPUT"), 10.0F);
  }
  EXPECT_EQ(cls.statistics().success.count, 100U);
  EXPECT_EQ(p.statistics().steps[1].success.count, 50U);
}

TEST_F(Pipeline, CancellationReachesAQueuedStepAndStopsStepsNotYetSent) {
  gate hold;
  std::atomic<int> executions{0};
  cls_backend::before = [&](servekit::batch&) {
    if (executions.fetch_add(1) == 0) {
      EXPECT_TRUE(hold.wait());
    }
  };
  // The first request occupies classify's only instance.
  auto first = p.infer(make_request("IMAGE", 1.0F, 1, "first"));
  while (executions.load() == 0) {
    std::this_thread::yield();
  }
  // The second one's classify step queues behind it; cancelling answers it at once.
  servekit::cancellation_source source;
  auto second_request = make_request("IMAGE", 1.0F, 1, "second");
  second_request.cancellation = source.token();
  second_request.requested_outputs = {"CLASSIFICATION"};
  auto second = p.infer(std::move(second_request));
  while (cls.statistics().pending_request_count == 0) {
    std::this_thread::yield();
  }
  p.cancel(source);
  auto r = second.get();
  EXPECT_EQ(r.status.code(), status_code::cancelled);
  EXPECT_NE(r.status.message().find("in ensemble 'pipeline', step 1 (model 'classify')"),
            std::string::npos)
      << r.status.message();
  hold.open();
  EXPECT_TRUE(first.get().ok());

  // Cancelled before a step was sent: the step is not sent.
  gate hold_pre;
  pre_backend::before = [&](servekit::batch&) { EXPECT_TRUE(hold_pre.wait()); };
  servekit::cancellation_source early;
  auto third_request = make_request("IMAGE", 1.0F, 1, "third");
  third_request.cancellation = early.token();
  const auto classified = cls.statistics().execution_count;
  auto third = p.infer(std::move(third_request));
  early.cancel(); // preprocess is executing: it finishes, the branches are never sent
  hold_pre.open();
  auto r3 = third.get();
  EXPECT_EQ(r3.status.code(), status_code::cancelled);
  EXPECT_EQ(cls.statistics().execution_count, classified);
}

TEST_F(Pipeline, ShutdownWaitsForRequestsInFlightThenRefusesNewOnes) {
  gate hold;
  cls_backend::before = [&](servekit::batch&) { EXPECT_TRUE(hold.wait()); };
  auto f = p.infer(make_request("IMAGE", 1.0F));
  std::thread opener{[&] {
    std::this_thread::sleep_for(20ms); // lets shutdown start waiting first (not a timing rule)
    hold.open();
  }};
  p.shutdown(servekit::shutdown_mode::drain);
  EXPECT_EQ(f.wait_for(0s), std::future_status::ready);
  EXPECT_TRUE(f.get().ok());
  opener.join();
  auto s = p.submit(make_request("IMAGE", 1.0F), [](servekit::response&&) {});
  EXPECT_EQ(s.code(), status_code::unavailable);
}

TEST_F(Pipeline, ACancellingShutdownSendsNoFurtherSteps) {
  gate hold;
  gate preprocessing;
  pre_backend::before = [&](servekit::batch&) {
    preprocessing.open();
    EXPECT_TRUE(hold.wait());
  };
  auto f = p.infer(make_request("IMAGE", 1.0F));
  EXPECT_TRUE(preprocessing.wait());
  std::thread opener{[&] {
    std::this_thread::sleep_for(20ms); // lets shutdown start first (not a timing rule)
    hold.open();
  }};
  p.shutdown(servekit::shutdown_mode::cancel); // returns once the request is answered
  opener.join();
  auto r = f.get();
  EXPECT_EQ(r.status.code(), status_code::cancelled);
  EXPECT_NE(r.status.message().find("ensemble 'pipeline' is shutting down"), std::string::npos)
      << r.status.message();
  EXPECT_EQ(cls.statistics().execution_count, 0U);
  EXPECT_EQ(seg.statistics().execution_count, 0U);
}

TEST_F(Pipeline, AStepRejectedByItsModelFailsTheRequest) {
  seg.shutdown(servekit::shutdown_mode::drain);
  auto r = p.infer(make_request("IMAGE", 1.0F)).get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status.code(), status_code::unavailable);
  EXPECT_NE(r.status.message().find("step 2 (model 'segment')"), std::string::npos)
      << r.status.message();
}

// -- max_inflight_requests -----------------------------------------------------------------------

using slow_backend = unary_backend<plus_one, "X", "Y", 0>;
using slow_model = servekit::model<slow_backend, servekit::instance_group<4>>;
using fast_model = servekit::model<unary_backend<times_two, "X", "Y", 0>>;
using limited = servekit::ensemble<servekit::inputs<"IN">, servekit::outputs<"OUT">,
                                   step<fast_model, in<"X", "IN">, out<"Y", "mid">>,
                                   step<slow_model, in<"X", "mid">, out<"Y", "OUT">>>;

TEST(EnsembleBackpressure, MaxInflightRequestsCapsEachStepWithoutDeadlock) {
  slow_backend::reset();
  std::atomic<int> executing{0};
  std::atomic<int> most{0};
  slow_backend::before = [&](servekit::batch&) {
    const int now = executing.fetch_add(1) + 1;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(1ms); // give other requests the chance to overlap
    executing.fetch_sub(1);
  };
  servekit::model_options fo;
  fo.name = "fast";
  servekit::model_options so;
  so.name = "slow";
  fast_model fast{fo};
  slow_model slow{so};
  limited e{{.name = "limited", .max_inflight_requests = 2}, fast, slow};

  std::vector<std::future<servekit::response>> futures;
  for (int i = 0; i < 40; ++i) {
    servekit::request r;
    auto t = servekit::make_tensor("IN", data_type::fp32, shape{4});
    std::fill(t.values<float>().begin(), t.values<float>().end(), 1.0F);
    r.inputs.push_back(std::move(t));
    futures.push_back(e.infer(std::move(r)));
  }
  for (auto& f : futures) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status.message();
    EXPECT_EQ(first_value(r, "OUT"), 3.0F);
  }
  EXPECT_LE(most.load(), 2);
  EXPECT_GE(most.load(), 1);
  EXPECT_EQ(slow.statistics().success.count, 40U);
  slow_backend::reset();
}

TEST(EnsembleBackpressure, LaunchesWaitingForAPlaceAreAnsweredWhenTheirRequestsAreCancelled) {
  slow_backend::reset();
  gate hold;
  std::atomic<int> executions{0};
  slow_backend::before = [&](servekit::batch&) {
    if (executions.fetch_add(1) == 0) {
      EXPECT_TRUE(hold.wait());
    }
  };
  servekit::model_options fo;
  fo.name = "fast";
  servekit::model_options so;
  so.name = "slow";
  fast_model fast{fo};
  slow_model slow{so};
  limited e{{.name = "limited", .max_inflight_requests = 1}, fast, slow};

  const auto request_with = [](const servekit::cancellation_token& token) {
    servekit::request r;
    auto t = servekit::make_tensor("IN", data_type::fp32, shape{4});
    std::fill(t.values<float>().begin(), t.values<float>().end(), 1.0F);
    r.inputs.push_back(std::move(t));
    r.cancellation = token;
    return r;
  };
  auto first = e.infer(request_with({}));
  while (executions.load() == 0) {
    std::this_thread::yield();
  }
  // Thousands of launches queue for step 1's single place, then their requests are cancelled.
  servekit::cancellation_source source;
  constexpr int waiting = 3000;
  std::vector<std::future<servekit::response>> futures;
  futures.reserve(waiting);
  for (int i = 0; i < waiting; ++i) {
    futures.push_back(e.infer(request_with(source.token())));
  }
  source.cancel();
  hold.open(); // the place frees once: every waiting launch is answered, none overflows the stack
  EXPECT_TRUE(first.get().ok());
  int cancelled = 0;
  for (auto& f : futures) {
    cancelled += f.get().status.code() == status_code::cancelled ? 1 : 0;
  }
  EXPECT_GE(cancelled, waiting - 1); // one may have been sent before the cancel
  slow_backend::reset();
}

// -- batch dimension adaptation
// --------------------------------------------------------------------

using batching_model = servekit::model<unary_backend<plus_one, "A", "B", 8>>;
using flat_backend = unary_backend<times_two, "C", "D", 0>;
using flat_model = servekit::model<flat_backend>;
using mixed = servekit::ensemble<servekit::inputs<"IN">, servekit::outputs<"OUT">,
                                 step<batching_model, in<"A", "IN">, out<"B", "mid">>,
                                 step<flat_model, in<"C", "mid">, out<"D", "OUT">>>;

TEST(EnsembleBatchDims, AdaptsBetweenBatchingAndNonBatchingSteps) {
  flat_backend::reset();
  shape seen_by_flat;
  flat_backend::before = [&](servekit::batch& b) {
    seen_by_flat = b.request(0).find_input("C")->shape;
  };
  servekit::model_options bo;
  bo.name = "batching";
  servekit::model_options fo;
  fo.name = "flat";
  batching_model batching{bo};
  flat_model flat{fo};
  mixed e{{.name = "mixed"}, batching, flat};
  EXPECT_EQ(e.max_batch_size(), 0); // a non-batching step: the ensemble does not batch

  servekit::request r;
  auto t = servekit::make_tensor("IN", data_type::fp32, shape{4}); // no batch dim
  std::fill(t.values<float>().begin(), t.values<float>().end(), 1.0F);
  r.inputs.push_back(std::move(t));
  auto resp = e.infer(std::move(r)).get();
  ASSERT_TRUE(resp.ok()) << resp.status.message();
  EXPECT_EQ(seen_by_flat, (shape{4})); // [1,4] from the batching step, batch dim stripped
  EXPECT_EQ(resp.find_output("OUT")->shape, (shape{4}));
  EXPECT_EQ(first_value(resp, "OUT"), 4.0F);
  flat_backend::reset();
}

// -- nesting
// ---------------------------------------------------------------------------------------

using post_backend = unary_backend<plus_one, "SCORES", "FINAL", 8>;
using postprocess = servekit::model<post_backend>;
using outer =
    servekit::ensemble<servekit::inputs<"PHOTO">, servekit::outputs<"LABEL">,
                       step<pipeline, in<"IMAGE", "PHOTO">, out<"CLASSIFICATION", "scores">>,
                       step<postprocess, in<"SCORES", "scores">, out<"FINAL", "LABEL">>>;

TEST_F(Pipeline, AnEnsembleIsAStepOfAnotherEnsemble) {
  static_assert(servekit::servable<pipeline>);
  static_assert(pipeline::traits::inputs.size() == 1);
  static_assert(pipeline::traits::inputs[0].type == data_type::fp32);
  servekit::model_options po;
  po.name = "postprocess";
  postprocess post{po};
  outer o{{.name = "outer"}, p, post};
  auto r = o.infer(make_request("PHOTO", 1.0F)).get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(first_value(r, "LABEL"), 5.0F); // ((1 + 1) * 2) + 1
  // The inner ensemble ran only what the outer one needs.
  EXPECT_EQ(seg.statistics().execution_count, 0U);
  EXPECT_EQ(o.statistics().steps[0].model_name, "pipeline");
  o.shutdown(servekit::shutdown_mode::drain);
}

// -- request fields reach the steps
// ----------------------------------------------------------------

/// A running sum kept as implicit state by the sequence batcher: OUT = IN + state.
struct running_sum {
  static constexpr std::int32_t max_batch_size = 4;
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUT", data_type::fp32, {4}},
                                                             {"OUT_STATE", data_type::fp32, {4}}};
  static inline std::vector<servekit::request> seen; // NOLINT: test-only
  static inline std::mutex seen_mutex;               // NOLINT: test-only

  explicit running_sum(const servekit::instance_context&) {}
  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (!b.sequence(i).ready) {
        continue;
      }
      auto& r = b.request(i);
      {
        const std::lock_guard lock{seen_mutex};
        servekit::request copy;
        copy.id = r.id;
        copy.priority = r.priority;
        copy.timeout_us = r.timeout_us;
        copy.sequence_id = r.sequence_id;
        copy.sequence_start = r.sequence_start;
        copy.sequence_end = r.sequence_end;
        seen.push_back(std::move(copy));
      }
      const auto in = r.find_input("IN")->values<float>();
      const auto state = r.find_input("IN_STATE")->values<float>();
      std::array<float, 4> sum{};
      for (std::size_t k = 0; k < 4; ++k) {
        sum[k] = in[k] + (b.sequence(i).start ? 0.0F : state[k]);
      }
      for (const char* name : {"OUT", "OUT_STATE"}) {
        b.response(i).outputs.push_back(
            servekit::make_tensor(name, data_type::fp32, shape{1, 4}, std::span<const float>{sum}));
      }
    }
  }
};
using stateful =
    servekit::model<running_sum,
                    servekit::sequence_batcher<servekit::direct, servekit::host_state_store>>;
using stateful_pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"TOTAL">,
    step<preprocess, in<"RAW_IMAGE", "IMAGE">, out<"PREPROCESSED_OUTPUT", "prepped">>,
    step<stateful, in<"IN", "prepped">, out<"OUT", "TOTAL">>>;

// As Triton (core#262): the ensemble request's parameters go to every composing model.
TEST_F(Pipeline, RequestParametersReachEveryStep) {
  std::atomic<std::int64_t> pre_saw{-1};
  std::atomic<std::int64_t> cls_saw{-1};
  pre_backend::before = [&](servekit::batch& b) {
    pre_saw = b.request(0).parameters.get<std::int64_t>("max_tokens").value_or(0);
  };
  cls_backend::before = [&](servekit::batch& b) {
    cls_saw = b.request(0).parameters.get<std::int64_t>("max_tokens").value_or(0);
  };
  auto r = make_request("IMAGE", 1.0F);
  r.parameters.set("max_tokens", std::int64_t{7});
  const auto answer = p.infer(std::move(r)).get();
  ASSERT_TRUE(answer.ok()) << answer.status.message();
  EXPECT_EQ(pre_saw.load(), 7);
  EXPECT_EQ(cls_saw.load(), 7);
}

TEST_F(Pipeline, SequenceFieldsPriorityAndTimeoutReachAStatefulStep) {
  running_sum::seen.clear();
  servekit::model_options o;
  o.name = "sum";
  servekit::sequence_batching_options sb;
  sb.state.push_back({"IN_STATE", "OUT_STATE", data_type::fp32, shape{4}, {}, false, false});
  o.sequence_batching = sb;
  stateful sum{o};
  stateful_pipeline sp{{.name = "stateful"}, pre, sum};

  float total = 0;
  for (int i = 0; i < 3; ++i) {
    auto r = make_request("IMAGE", 1.0F, 1, "s" + std::to_string(i));
    r.sequence_id = 42U;
    r.sequence_start = i == 0;
    r.sequence_end = i == 2;
    r.priority = 1;
    r.timeout_us = 5'000'000;
    auto resp = sp.infer(std::move(r)).get();
    ASSERT_TRUE(resp.ok()) << resp.status.message();
    total = first_value(resp, "TOTAL");
  }
  EXPECT_EQ(total, 6.0F); // (1 + 1) three times, summed by the stateful step
  ASSERT_EQ(running_sum::seen.size(), 3U);
  EXPECT_EQ(running_sum::seen[0].sequence_id.as_uint(), 42U);
  EXPECT_TRUE(running_sum::seen[0].sequence_start);
  EXPECT_TRUE(running_sum::seen[2].sequence_end);
  EXPECT_EQ(running_sum::seen[1].priority, 1U);
  EXPECT_EQ(running_sum::seen[1].timeout_us, 5'000'000U);
  EXPECT_EQ(running_sum::seen[1].id, "s1");
  sp.shutdown(servekit::shutdown_mode::drain);
}

// -- many threads, failures injected
// ------------------------------------------------------------------

TEST_F(Pipeline, EveryAcceptedRequestGetsExactlyOneResponseUnderConcurrentFailures) {
  std::atomic<int> n{0};
  cls_backend::before = [&](servekit::batch&) {
    if (n.fetch_add(1) % 3 == 0) {
      throw std::runtime_error("injected");
    }
  };
  constexpr int threads = 4;
  constexpr int per_thread = 100;
  std::atomic<int> responses{0};
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&] {
      std::vector<std::future<servekit::response>> fs;
      for (int i = 0; i < per_thread; ++i) {
        auto req = make_request("IMAGE", 1.0F);
        if (i % 4 == 0) {
          req.requested_outputs = {"SEGMENTATION"};
        }
        fs.push_back(p.infer(std::move(req)));
      }
      for (auto& f : fs) {
        auto r = f.get();
        responses.fetch_add(1);
        ok.fetch_add(r.ok() ? 1 : 0);
      }
    });
  }
  for (auto& c : clients) {
    c.join();
  }
  EXPECT_EQ(responses.load(), threads * per_thread);
  const auto s = p.statistics();
  EXPECT_EQ(s.success.count + s.fail.count, static_cast<std::uint64_t>(threads * per_thread));
  EXPECT_EQ(s.success.count, static_cast<std::uint64_t>(ok.load()));
  EXPECT_GT(s.fail.count, 0U);
  EXPECT_EQ(s.pending_request_count, 0U);
}

} // namespace ensemble_test
