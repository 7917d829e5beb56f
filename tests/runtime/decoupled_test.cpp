// Decoupled models: partial responses during execute, response_sender after execute (any
// thread, any order across requests), the final flag, refused late sends, released senders,
// final_response_timeout (rule in virtual time, plus one threaded case), shutdown, statistics
// and config checks.
#include "../../examples/repeat/repeat_backend.hpp"

#include <servekit/backend/response_sender.hpp>
#include <servekit/runtime/detail/decoupled_deadlines.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/state/host_state_store.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace decoupled_test {

using namespace std::chrono_literals;
using servekit::data_type;
using servekit::shape;

/// What the backend does on execute; set by each test before building its model.
std::function<void(servekit::batch&)> on_execute; // NOLINT: test-only global

struct streaming_backend {
  static constexpr bool decoupled = true;
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", data_type::int32, {-1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUT", data_type::int32, {1}}};
  explicit streaming_backend(const servekit::instance_context& /*context*/) {}
  void execute(servekit::batch& b) { on_execute(b); }
};

struct plain_backend {
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", data_type::int32, {-1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUT", data_type::int32, {1}}};
  explicit plain_backend(const servekit::instance_context& /*context*/) {}
  void execute(servekit::batch& /*b*/) {}
};

using streaming_model = servekit::model<streaming_backend>;

servekit::request make_request(std::string id) {
  servekit::request r;
  r.id = std::move(id);
  auto t = servekit::make_tensor("IN", data_type::int32, shape{1});
  t.values<std::int32_t>()[0] = 7;
  r.inputs.push_back(std::move(t));
  return r;
}

servekit::response value(std::int32_t v) {
  servekit::response r;
  r.add_output("OUT", data_type::int32, shape{1}).values<std::int32_t>()[0] = v;
  return r;
}

servekit::model_options options(std::uint64_t timeout_us = 0) {
  servekit::model_options o;
  o.name = "stream";
  o.model_transaction_policy = servekit::model_transaction_policy_options{
      .decoupled = true, .final_response_timeout_microseconds = timeout_us};
  return o;
}

/// What a test checks of one response (responses themselves are move-only).
struct seen {
  std::string id;
  bool final = false;
  servekit::status status;
  std::vector<std::int32_t> outputs; // OUT's value per response, when present
  [[nodiscard]] bool ok() const noexcept { return status.ok(); }
};

/// Every response of every request, in arrival order.
class collector {
public:
  servekit::response_sink sink() {
    return [this](servekit::response&& r) {
      // Notified under the lock: the test may destroy the collector once it sees the final.
      const std::lock_guard lock{mutex_};
      finals_ += r.final ? 1 : 0;
      seen s{r.id, r.final, r.status, {}};
      if (const auto* out = r.find_output("OUT")) {
        s.outputs.push_back(out->values<std::int32_t>()[0]);
      }
      responses_.push_back(std::move(s));
      cv_.notify_all();
    };
  }
  [[nodiscard]] bool wait_finals(int n) {
    std::unique_lock lock{mutex_};
    return cv_.wait_for(lock, 10s, [&] { return finals_ >= n; });
  }
  [[nodiscard]] std::vector<seen> of(const std::string& id) {
    const std::lock_guard lock{mutex_};
    std::vector<seen> out;
    for (const auto& r : responses_) {
      if (r.id == id) {
        out.push_back(r);
      }
    }
    return out;
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<seen> responses_;
  int finals_ = 0;
};

std::int32_t out_of(const seen& r) { return r.outputs.at(0); }

/// Senders the backend handed over, for the test thread to drive.
class sender_box {
public:
  void put(servekit::response_sender s) {
    {
      const std::lock_guard lock{mutex_};
      senders_.push_back(std::move(s));
    }
    cv_.notify_all();
  }
  [[nodiscard]] bool wait_for(std::size_t n) {
    std::unique_lock lock{mutex_};
    return cv_.wait_for(lock, 10s, [&] { return senders_.size() >= n; });
  }
  servekit::response_sender& operator[](std::size_t i) {
    const std::lock_guard lock{mutex_};
    return senders_[i];
  }
  void clear() {
    const std::lock_guard lock{mutex_};
    senders_.clear();
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<servekit::response_sender> senders_;
};

TEST(Decoupled, PartialsDuringExecuteThenTheFilledResponseAsFinal) {
  on_execute = [](servekit::batch& b) {
    for (std::int32_t k = 0; k < 3; ++k) {
      ASSERT_TRUE(b.send_partial(0, value(k)).ok());
    }
  };
  streaming_model m{options()};
  collector c;
  ASSERT_TRUE(m.submit(make_request("a"), c.sink()).ok());
  ASSERT_TRUE(c.wait_finals(1));
  const auto got = c.of("a");
  ASSERT_EQ(got.size(), 4U);
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_FALSE(got[k].final);
    EXPECT_EQ(out_of(got[k]), static_cast<std::int32_t>(k));
  }
  EXPECT_TRUE(got[3].final);
  EXPECT_TRUE(got[3].outputs.empty());
}

TEST(Decoupled, SenderAnswersFromAnotherThreadAfterExecuteReturned) {
  std::thread worker;
  on_execute = [&](servekit::batch& b) {
    worker = std::thread{[s = b.take_sender(0)]() mutable {
      for (std::int32_t k = 0; k < 5; ++k) {
        EXPECT_TRUE(s.send(value(k)).ok());
      }
      EXPECT_TRUE(s.finish().ok());
    }};
  };
  streaming_model m{options()};
  collector c;
  ASSERT_TRUE(m.submit(make_request("a"), c.sink()).ok());
  ASSERT_TRUE(c.wait_finals(1));
  m.shutdown(servekit::shutdown_mode::drain); // execute (which started the worker) has returned
  worker.join();
  const auto got = c.of("a");
  ASSERT_EQ(got.size(), 6U); // five responses, then the flags-only final
  for (std::size_t k = 0; k < 5; ++k) {
    EXPECT_FALSE(got[k].final);
    EXPECT_EQ(out_of(got[k]), static_cast<std::int32_t>(k));
  }
  EXPECT_TRUE(got[5].final);
  EXPECT_TRUE(got[5].ok());
  EXPECT_TRUE(got[5].outputs.empty());

  const auto stats = m.statistics().response_stats;
  ASSERT_EQ(stats.size(), 6U);
  for (std::size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(stats[k].index, k);
    EXPECT_EQ(stats[k].success.count, 1U);
  }
  EXPECT_EQ(stats[5].empty_response.count, 1U);
  EXPECT_EQ(stats[5].success.count, 0U);
}

TEST(Decoupled, ZeroResponsesThenAnEmptyFinal) {
  on_execute = [](servekit::batch& b) { EXPECT_TRUE(b.take_sender(0).finish().ok()); };
  streaming_model m{options()};
  collector c;
  ASSERT_TRUE(m.submit(make_request("a"), c.sink()).ok());
  ASSERT_TRUE(c.wait_finals(1));
  const auto got = c.of("a");
  ASSERT_EQ(got.size(), 1U);
  EXPECT_TRUE(got[0].final);
  EXPECT_TRUE(got[0].ok());
  EXPECT_TRUE(got[0].outputs.empty());
  m.shutdown(servekit::shutdown_mode::drain); // the execution is counted after execute returns
  EXPECT_EQ(m.statistics().success.count, 1U);
}

TEST(Decoupled, ResponsesOfRequestsInterleaveInAnyOrder) {
  sender_box box;
  on_execute = [&](servekit::batch& b) { box.put(b.take_sender(0)); };
  streaming_model m{options()};
  collector c;
  ASSERT_TRUE(m.submit(make_request("a"), c.sink()).ok());
  ASSERT_TRUE(m.submit(make_request("b"), c.sink()).ok());
  ASSERT_TRUE(box.wait_for(2));
  // Senders are in execution order; find which is which from a first response.
  EXPECT_TRUE(box[1].send(value(10)).ok());
  EXPECT_TRUE(box[0].send(value(20)).ok());
  EXPECT_TRUE(box[1].send_final(value(11)).ok());
  EXPECT_TRUE(box[0].send(value(21)).ok());
  EXPECT_TRUE(box[0].finish().ok());
  ASSERT_TRUE(c.wait_finals(2));
  const auto a = c.of("a");
  const auto b = c.of("b");
  ASSERT_EQ(a.size(), 3U);
  ASSERT_EQ(b.size(), 2U);
  EXPECT_EQ(out_of(a[0]), 20);
  EXPECT_EQ(out_of(a[1]), 21);
  EXPECT_TRUE(a[2].final);
  EXPECT_EQ(out_of(b[0]), 10);
  EXPECT_EQ(out_of(b[1]), 11);
  EXPECT_TRUE(b[1].final);
  box.clear();
}

TEST(Decoupled, SendAfterTheFinalIsRefusedAndDropped) {
  sender_box box;
  on_execute = [&](servekit::batch& b) { box.put(b.take_sender(0)); };
  streaming_model m{options()};
  collector c;
  ASSERT_TRUE(m.submit(make_request("a"), c.sink()).ok());
  ASSERT_TRUE(box.wait_for(1));
  EXPECT_TRUE(box[0].finish().ok());
  EXPECT_TRUE(box[0].finished());
  const auto late = box[0].send(value(1));
  EXPECT_EQ(late.code(), servekit::status_code::unavailable);
  EXPECT_NE(late.message().find("already has its final response"), std::string::npos);
  EXPECT_FALSE(box[0].finish().ok());
  ASSERT_TRUE(c.wait_finals(1));
  EXPECT_EQ(c.of("a").size(), 1U);
  box.clear();
}

// The sink goes with the final response, even while the backend still holds the sender: what
// it holds (an HTTP session, say) must not wait for the backend to let the sender go.
TEST(Decoupled, TheFinalResponseLetsGoOfTheSinkWhileTheSenderIsStillHeld) {
  sender_box box;
  on_execute = [&](servekit::batch& b) { box.put(b.take_sender(0)); };
  streaming_model m{options()};
  collector c;
  auto held_by_sink = std::make_shared<int>(0);
  std::weak_ptr<int> watch = held_by_sink;
  servekit::response_sink inner = c.sink();
  servekit::response_sink sink = [inner =
                                      std::make_shared<servekit::response_sink>(std::move(inner)),
                                  held_by_sink = std::move(held_by_sink)](servekit::response&& r) {
    inner->send(std::move(r));
  };
  ASSERT_TRUE(m.submit(make_request("a"), std::move(sink)).ok());
  ASSERT_TRUE(box.wait_for(1));
  EXPECT_TRUE(box[0].send(value(1)).ok());
  EXPECT_FALSE(watch.expired()) << "the sink lives until the final response";
  EXPECT_TRUE(box[0].finish().ok());
  ASSERT_TRUE(c.wait_finals(1));
  EXPECT_TRUE(watch.expired()) << "the final response let go of the sink";
  EXPECT_TRUE(box[0].finished());
  box.clear();
}

TEST(Decoupled, ASenderReleasedWithoutFinalSendsAnErrorFinal) {
  sender_box box;
  on_execute = [&](servekit::batch& b) { box.put(b.take_sender(0)); };
  streaming_model m{options()};
  collector c;
  ASSERT_TRUE(m.submit(make_request("a"), c.sink()).ok());
  ASSERT_TRUE(box.wait_for(1));
  EXPECT_TRUE(box[0].send(value(1)).ok());
  box.clear(); // destroys the sender
  ASSERT_TRUE(c.wait_finals(1));
  const auto got = c.of("a");
  ASSERT_EQ(got.size(), 2U);
  EXPECT_TRUE(got[1].final);
  EXPECT_EQ(got[1].status.code(), servekit::status_code::internal);
  EXPECT_NE(got[1].status.message().find("released request 'a' without a final response"),
            std::string::npos);
  const auto stats = m.statistics().response_stats;
  ASSERT_EQ(stats.size(), 2U);
  EXPECT_EQ(stats[1].fail.count, 1U);
}

TEST(Decoupled, AnExecutionThatThrowsFailsEvenATakenRequest) {
  sender_box box;
  on_execute = [&](servekit::batch& b) {
    box.put(b.take_sender(0));
    throw std::runtime_error("boom");
  };
  streaming_model m{options()};
  collector c;
  ASSERT_TRUE(m.submit(make_request("a"), c.sink()).ok());
  ASSERT_TRUE(c.wait_finals(1));
  const auto got = c.of("a");
  ASSERT_EQ(got.size(), 1U);
  EXPECT_NE(got[0].status.message().find("boom"), std::string::npos);
  EXPECT_FALSE(box[0].send(value(1)).ok());
  box.clear();
}

TEST(Decoupled, AFinalOverdueGetsDeadlineExceededAndShutdownDoesNotHang) {
  sender_box box;
  on_execute = [&](servekit::batch& b) { box.put(b.take_sender(0)); }; // never finishes
  collector c;
  {
    streaming_model m{options(20'000)}; // 20 ms
    ASSERT_TRUE(m.submit(make_request("a"), c.sink()).ok());
    ASSERT_TRUE(box.wait_for(1));
    ASSERT_TRUE(c.wait_finals(1));
    const auto got = c.of("a");
    ASSERT_EQ(got.size(), 1U);
    EXPECT_TRUE(got[0].final);
    EXPECT_EQ(got[0].status.code(), servekit::status_code::deadline_exceeded);
    EXPECT_NE(got[0].status.message().find("model 'stream'"), std::string::npos);
    EXPECT_NE(got[0].status.message().find("final_response_timeout_microseconds=20000"),
              std::string::npos);
    EXPECT_FALSE(box[0].send(value(1)).ok()); // dropped
    EXPECT_EQ(c.of("a").size(), 1U);
    // A second one still outstanding when the model goes: the drain waits for its timeout.
    ASSERT_TRUE(m.submit(make_request("b"), c.sink()).ok());
    ASSERT_TRUE(box.wait_for(2));
  }
  ASSERT_TRUE(c.wait_finals(2));
  EXPECT_EQ(c.of("b").back().status.code(), servekit::status_code::deadline_exceeded);
  box.clear();
}

TEST(Decoupled, CancellingShutdownAnswersOutstandingRequestsCancelled) {
  sender_box box;
  on_execute = [&](servekit::batch& b) { box.put(b.take_sender(0)); };
  streaming_model m{options()};
  collector c;
  ASSERT_TRUE(m.submit(make_request("a"), c.sink()).ok());
  ASSERT_TRUE(box.wait_for(1));
  m.shutdown(servekit::shutdown_mode::cancel);
  ASSERT_TRUE(c.wait_finals(1));
  EXPECT_EQ(c.of("a").back().status.code(), servekit::status_code::cancelled);
  EXPECT_FALSE(box[0].finish().ok());
  box.clear();
}

TEST(Decoupled, DrainingShutdownWaitsForOutstandingRequests) {
  sender_box box;
  on_execute = [&](servekit::batch& b) { box.put(b.take_sender(0)); };
  collector c;
  std::thread finisher;
  {
    streaming_model m{options()};
    ASSERT_TRUE(m.submit(make_request("a"), c.sink()).ok());
    ASSERT_TRUE(box.wait_for(1));
    finisher = std::thread{[&] {
      std::this_thread::sleep_for(20ms); // the drain must wait through this
      EXPECT_TRUE(box[0].send_final(value(3)).ok());
    }};
  } // destroying the model drains
  EXPECT_EQ(c.of("a").size(), 1U);
  EXPECT_TRUE(c.of("a")[0].ok());
  finisher.join();
  box.clear();
}

// A drain waiting for a request the backend never finishes can still be turned into a cancel
// from another thread (without it, both calls would wait forever).
TEST(Decoupled, ACancellingShutdownEndsADrainThatWaitsForever) {
  sender_box box;
  on_execute = [&](servekit::batch& b) { box.put(b.take_sender(0)); }; // never finishes
  streaming_model m{options()};
  collector c;
  ASSERT_TRUE(m.submit(make_request("a"), c.sink()).ok());
  ASSERT_TRUE(box.wait_for(1));
  std::thread drainer{[&] { m.shutdown(servekit::shutdown_mode::drain); }};
  m.shutdown(servekit::shutdown_mode::cancel); // answers "a", so the drain lets go too
  drainer.join();
  ASSERT_TRUE(c.wait_finals(1));
  EXPECT_EQ(c.of("a").back().status.code(), servekit::status_code::cancelled);
  box.clear();
}

TEST(Decoupled, ConfigMustAgreeWithTheBackend) {
  try {
    servekit::model<plain_backend> m{options()};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/model_transaction_policy/decoupled");
    EXPECT_NE(std::string{e.what()}.find("decoupled = false"), std::string::npos);
  }
  auto o = options();
  o.model_transaction_policy->decoupled = false;
  EXPECT_THROW(streaming_model{o}, servekit::config_error);
  o.model_transaction_policy->final_response_timeout_microseconds = 5;
  try {
    servekit::model<plain_backend> m{o};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/model_transaction_policy/final_response_timeout_microseconds");
  }
  // Unset, the backend decides.
  servekit::model_options unset;
  unset.name = "stream";
  on_execute = [](servekit::batch& /*b*/) {};
  streaming_model m{unset};
  EXPECT_TRUE(m.infer(make_request("a")).get().ok());
}

TEST(Decoupled, SequenceBatchedRequestsCanBeAnsweredAfterExecuteToo) {
  std::vector<std::thread> workers;
  on_execute = [&](servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      workers.emplace_back([s = b.take_sender(i)]() mutable {
        EXPECT_TRUE(s.send(value(1)).ok());
        EXPECT_TRUE(s.send_final(value(2)).ok());
      });
    }
  };
  collector c;
  {
    servekit::model<streaming_backend,
                    servekit::sequence_batcher<servekit::direct, servekit::host_state_store>>
        m{options()};
    for (int k = 0; k < 2; ++k) {
      auto r = make_request("s" + std::to_string(k));
      r.sequence_id = servekit::correlation_id{std::uint64_t{42}};
      r.sequence_start = k == 0;
      r.sequence_end = k == 1;
      ASSERT_TRUE(m.submit(std::move(r), c.sink()).ok());
    }
    ASSERT_TRUE(c.wait_finals(2));
  }
  for (auto& w : workers) {
    w.join();
  }
  for (const char* id : {"s0", "s1"}) {
    const auto got = c.of(id);
    ASSERT_EQ(got.size(), 2U) << id;
    EXPECT_EQ(out_of(got[0]), 1);
    EXPECT_FALSE(got[0].final);
    EXPECT_EQ(out_of(got[1]), 2);
    EXPECT_TRUE(got[1].final);
  }
}

// -- examples/repeat's backend ------------------------------------------------------------------

servekit::request repeat_request(std::string id, std::vector<std::int32_t> values,
                                 std::uint32_t delay_ms, std::uint32_t wait_ms) {
  servekit::request r;
  r.id = std::move(id);
  const auto n = static_cast<std::int64_t>(values.size());
  auto in = servekit::make_tensor("IN", data_type::int32, shape{n});
  auto delay = servekit::make_tensor("DELAY", data_type::uint32, shape{n});
  for (std::size_t i = 0; i < values.size(); ++i) {
    in.values<std::int32_t>()[i] = values[i];
    delay.values<std::uint32_t>()[i] = delay_ms;
  }
  auto wait = servekit::make_tensor("WAIT", data_type::uint32, shape{1});
  wait.values<std::uint32_t>()[0] = wait_ms;
  r.inputs.push_back(std::move(in));
  r.inputs.push_back(std::move(delay));
  r.inputs.push_back(std::move(wait));
  return r;
}

servekit::model_options repeat_options(std::uint64_t timeout_us, bool send_final) {
  auto o = options(timeout_us);
  o.name = "repeat_int32";
  if (!send_final) {
    o.parameters["send_final"] = "false";
  }
  return o;
}

TEST(Repeat, NValuesGiveNResponsesInOrderThenAnEmptyFinal) {
  servekit::model<repeat::backend> m{repeat_options(0, true)};
  collector c;
  ASSERT_TRUE(m.submit(repeat_request("a", {4, 2, 0, 1}, 1, 2), c.sink()).ok());
  ASSERT_TRUE(m.submit(repeat_request("none", {}, 0, 0), c.sink()).ok());
  ASSERT_TRUE(c.wait_finals(2));
  const auto a = c.of("a");
  ASSERT_EQ(a.size(), 5U);
  const std::int32_t expected[] = {4, 2, 0, 1};
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_FALSE(a[k].final);
    EXPECT_EQ(out_of(a[k]), expected[k]);
  }
  EXPECT_TRUE(a[4].final);
  EXPECT_TRUE(a[4].ok());
  EXPECT_TRUE(a[4].outputs.empty());
  const auto none = c.of("none");
  ASSERT_EQ(none.size(), 1U); // zero responses, then the final flag
  EXPECT_TRUE(none[0].final);
  EXPECT_TRUE(none[0].ok());
}

TEST(Repeat, ABackendThatNeverSendsTheFinalIsCaughtByTheTimeout) {
  collector c;
  {
    servekit::model<repeat::backend> m{repeat_options(20'000, false)};
    ASSERT_TRUE(m.submit(repeat_request("a", {5, 6}, 0, 0), c.sink()).ok());
    ASSERT_TRUE(c.wait_finals(1));
  } // and the model goes away without hanging
  const auto a = c.of("a");
  ASSERT_EQ(a.size(), 3U);
  EXPECT_EQ(out_of(a[0]), 5);
  EXPECT_EQ(out_of(a[1]), 6);
  EXPECT_TRUE(a[2].final);
  EXPECT_EQ(a[2].status.code(), servekit::status_code::deadline_exceeded);
}

// -- the timeout rule, in virtual time ----------------------------------------------------------

TEST(DecoupledDeadlines, ExpiresOnlyWhatIsDueInDeadlineOrder) {
  using servekit::time_point;
  servekit::detail::decoupled_deadlines d;
  const time_point t0{};
  d.add(1, t0 + 30ms);
  d.add(2, t0 + 10ms);
  d.add(3, servekit::never); // no timeout: outstanding until its final
  d.add(4, t0 + 20ms);
  EXPECT_EQ(d.next_deadline(), t0 + 10ms);
  std::vector<std::uint64_t> expired;
  d.tick(t0 + 9ms, expired);
  EXPECT_TRUE(expired.empty());
  EXPECT_TRUE(d.remove(4)); // its final arrived in time
  d.tick(t0 + 30ms, expired);
  EXPECT_EQ(expired, (std::vector<std::uint64_t>{2, 1}));
  EXPECT_FALSE(d.remove(1)); // a final after expiry finds nothing
  EXPECT_EQ(d.size(), 1U);
  EXPECT_EQ(d.next_deadline(), servekit::never);
  std::vector<std::uint64_t> all;
  d.take_all(all);
  EXPECT_EQ(all, (std::vector<std::uint64_t>{3}));
  EXPECT_TRUE(d.empty());
}

} // namespace decoupled_test
