// Cancellation from the network over gRPC: a ModelInfer call whose client cancels it, or whose
// deadline passes, while its request waits in the model's queue cancels that request (answered
// `cancelled`, counted as a CANCELED failure, never executed); a ModelStreamInfer stream
// cancelled by its client stops its decoupled model at the next response. The server runs
// in-process on loopback; the backend holding the model's one instance is a gate the test opens,
// so what is queued does not depend on timing.
#include "archetypes/gated_backend.hpp"
#include "archetypes/temp_repository.hpp"

#include "bundled_backends.hpp"

#include <servekit/backend/backend.hpp>
#include <servekit/grpc/server.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/repository/model_repository.hpp>

#include <servekit/grpc/grpc_service.grpc.pb.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace grpc_cancellation_test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using archetypes::gated;
using archetypes::gated_backend;
using archetypes::gated_config;
using archetypes::gated_state;

using backends =
    servekit_server::bundled_backends::with<servekit::named_backend<"gated", gated_backend>>;

/// A repository of `gated` and the bundled repeat_int32, and the gRPC server over it.
class cancellation_server {
public:
  cancellation_server() {
    gated = &state_;
    folder_.write("gated", gated_config);
    fs::copy(fs::path{SERVEKIT_SOURCE_DIR} / "examples" / "models" / "repeat_int32",
             folder_.root() / "repeat_int32", fs::copy_options::recursive);
    repository_.load_all();
    servekit::grpc::server_options options;
    options.port = 0;
    options.thread_count = 2;
    server_.emplace(repository_, std::move(options));
    thread_ = std::thread{[this] { server_->run(); }};
    stub_ = inference::GRPCInferenceService::NewStub(::grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), ::grpc::InsecureChannelCredentials()));
  }
  cancellation_server(const cancellation_server&) = delete;
  cancellation_server& operator=(const cancellation_server&) = delete;
  ~cancellation_server() {
    state_.open.open();
    server_->stop();
    thread_.join();
    gated = nullptr;
  }

  [[nodiscard]] inference::GRPCInferenceService::Stub& stub() { return *stub_; }
  [[nodiscard]] gated_state& state() noexcept { return state_; }
  [[nodiscard]] servekit::statistics_snapshot statistics(std::string_view model) const {
    const auto m = repository_.find(model);
    return m ? m->model().statistics() : servekit::statistics_snapshot{};
  }

private:
  gated_state state_;
  archetypes::temp_repository folder_;
  servekit::model_repository repository_{folder_.root(), backends{}};
  std::optional<servekit::grpc::server> server_;
  std::thread thread_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

/// Polls `done` until it holds or 10 s pass.
bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

void add_input(inference::ModelInferRequest& r, const std::string& name, const std::string& type,
               std::int64_t length) {
  auto* in = r.add_inputs();
  in->set_name(name);
  in->set_datatype(type);
  in->add_shape(length);
}

inference::ModelInferRequest gated_request() {
  inference::ModelInferRequest q;
  q.set_model_name("gated");
  add_input(q, "INPUT0", "FP32", 1);
  q.mutable_inputs(0)->mutable_contents()->add_fp32_contents(7.0F);
  return q;
}

/// ModelInfer of `q` on a thread of its own, under `context` (kept by the caller, which may
/// cancel it); the future holds the call's status.
std::future<::grpc::Status> infer_async(cancellation_server& s, ::grpc::ClientContext& context,
                                        inference::ModelInferRequest q) {
  return std::async(std::launch::async, [&s, &context, q = std::move(q)] {
    inference::ModelInferResponse r;
    return s.stub().ModelInfer(&context, q, &r);
  });
}

std::chrono::system_clock::time_point in(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

/// The first call takes the gated model's only instance (which waits at the gate); the second,
/// queued behind it (its context made by `prepare_second`), ends (`end_second`: its client
/// cancels, or its deadline passes): it is answered `cancelled` from the queue, counted as Triton
/// counts it, and never reaches execute().
void expect_queued_call_cancelled(cancellation_server& s,
                                  const std::function<void(::grpc::ClientContext&)>& prepare_second,
                                  const std::function<void(::grpc::ClientContext&)>& end_second,
                                  ::grpc::StatusCode expected_code) {
  ::grpc::ClientContext first_context;
  first_context.set_deadline(in(10s));
  auto first = infer_async(s, first_context, gated_request());
  ASSERT_TRUE(eventually([&] { return s.state().executions.load() == 1; }));

  ::grpc::ClientContext second_context;
  prepare_second(second_context);
  auto second = infer_async(s, second_context, gated_request());
  end_second(second_context);
  EXPECT_EQ(second.get().error_code(), expected_code);
  ASSERT_TRUE(eventually([&] {
    return s.statistics("gated").failed_by(servekit::failure_reason::canceled) == 1;
  })) << "the queued request of a cancelled call was not cancelled";
  // The pending count drops once the answer is delivered (answer_early_exits), which may be
  // after the client has seen it.
  EXPECT_TRUE(eventually([&] { return s.statistics("gated").pending_request_count == 0; }));

  s.state().open.open();
  const auto st = first.get();
  EXPECT_TRUE(st.ok()) << st.error_message();
  const auto stats = s.statistics("gated");
  EXPECT_EQ(stats.execution_count, 1U);
  EXPECT_EQ(stats.inference_count, 1U);
  EXPECT_EQ(s.state().requests_executed.load(), 1);

  // The server goes on serving.
  ::grpc::ClientContext third_context;
  third_context.set_deadline(in(10s));
  EXPECT_TRUE(infer_async(s, third_context, gated_request()).get().ok());
}

TEST(GrpcNetworkCancellation, AQueuedInferWhoseClientCancelsIsCancelledAndNeverExecutes) {
  cancellation_server s;
  expect_queued_call_cancelled(
      s, [](::grpc::ClientContext& c) { c.set_deadline(in(10s)); },
      [&](::grpc::ClientContext& c) {
        ASSERT_TRUE(eventually([&] { return s.statistics("gated").pending_request_count == 1; }));
        c.TryCancel();
      },
      ::grpc::StatusCode::CANCELLED);
}

TEST(GrpcNetworkCancellation, AQueuedInferWhoseDeadlinePassesIsCancelledAndNeverExecutes) {
  cancellation_server s;
  // The client sends its deadline (grpc-timeout); the server cancels the call when it passes.
  expect_queued_call_cancelled(
      s, [](::grpc::ClientContext& c) { c.set_deadline(in(500ms)); }, [](::grpc::ClientContext&) {},
      ::grpc::StatusCode::DEADLINE_EXCEEDED);
}

/// repeat_int32 over a stream: `n` responses, the first at once, then 300 ms apart.
inference::ModelInferRequest slow_repeat_request(std::int32_t n) {
  inference::ModelInferRequest q;
  q.set_model_name("repeat_int32");
  add_input(q, "IN", "INT32", n);
  add_input(q, "DELAY", "UINT32", n);
  add_input(q, "WAIT", "UINT32", 1);
  for (std::int32_t i = 0; i < n; ++i) {
    q.mutable_inputs(0)->mutable_contents()->add_int_contents(i + 1);
    q.mutable_inputs(1)->mutable_contents()->add_uint_contents(i == 0 ? 0 : 300);
  }
  q.mutable_inputs(2)->mutable_contents()->add_uint_contents(0);
  return q;
}

/// Responses of repeat_int32 counted by its response statistics: failed or sent.
std::uint64_t repeat_responses(cancellation_server& s, bool failures) {
  std::uint64_t n = 0;
  for (const auto& stat : s.statistics("repeat_int32").response_stats) {
    n += failures ? stat.fail.count : stat.success.count;
  }
  return n;
}

TEST(GrpcNetworkCancellation, ACancelledStreamCancelsEveryRequestItHasWithAModel) {
  cancellation_server s;
  ::grpc::ClientContext context;
  context.set_deadline(in(10s));
  const auto stream = s.stub().ModelStreamInfer(&context);
  // Two models: gated executing one request and queueing the next, repeat_int32 streaming.
  ASSERT_TRUE(stream->Write(gated_request()));
  ASSERT_TRUE(eventually([&] { return s.state().executions.load() == 1; }));
  ASSERT_TRUE(stream->Write(gated_request()));
  ASSERT_TRUE(eventually([&] { return s.statistics("gated").pending_request_count == 1; }));
  ASSERT_TRUE(stream->Write(slow_repeat_request(5)));
  inference::ModelStreamInferResponse r;
  ASSERT_TRUE(stream->Read(&r)); // repeat's first response
  ASSERT_EQ(r.error_message(), "");
  context.TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), ::grpc::StatusCode::CANCELLED);

  ASSERT_TRUE(eventually([&] {
    return s.statistics("gated").failed_by(servekit::failure_reason::canceled) == 1;
  })) << "the stream's queued request was not cancelled";
  ASSERT_TRUE(eventually([&] { return repeat_responses(s, true) == 1; }))
      << "the stream's decoupled request was not cancelled";
  s.state().open.open();
  ASSERT_TRUE(eventually([&] { return s.statistics("gated").execution_count == 1; }));
  EXPECT_EQ(s.state().requests_executed.load(), 1);
  EXPECT_LT(repeat_responses(s, false), 5U);
}

TEST(GrpcNetworkCancellation, ACancelledStreamStopsItsDecoupledModel) {
  cancellation_server s;
  ::grpc::ClientContext context;
  context.set_deadline(in(10s));
  const auto stream = s.stub().ModelStreamInfer(&context);
  // Five responses 300 ms apart; the client reads the first, then cancels.
  ASSERT_TRUE(stream->Write(slow_repeat_request(5)));
  inference::ModelStreamInferResponse r;
  ASSERT_TRUE(stream->Read(&r));
  ASSERT_EQ(r.error_message(), "");
  context.TryCancel();
  EXPECT_EQ(stream->Finish().error_code(), ::grpc::StatusCode::CANCELLED);

  // The model stops at its next response with a final `cancelled` error, instead of sending
  // four more responses nobody reads.
  ASSERT_TRUE(eventually([&] { return repeat_responses(s, true) == 1; }))
      << "the model sent " << repeat_responses(s, false)
      << " responses: the stream was not cancelled";
  EXPECT_LT(repeat_responses(s, false), 5U);
}

} // namespace grpc_cancellation_test
