// submit_answering_refusals: accepted or refused, the outcome reaches the one callback, once.
#include <servekit/core/request_builder.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/submit_answering.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <string>

namespace submit_answering_test {

using servekit::data_type;

struct echo_backend {
  static constexpr servekit::tensor_declaration inputs[] = {{"X", data_type::int32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"Y", data_type::int32, {1}}};
  explicit echo_backend(const servekit::instance_context&) {}
  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::tensor& x = b.request(i).input("X");
      b.response(i).add_output("Y", data_type::int32, x.shape).values<std::int32_t>()[0] =
          x.values<std::int32_t>()[0];
    }
  }
};

/// Counts the responses and keeps the first.
struct outcome {
  std::atomic<int> calls{0};
  std::promise<servekit::response> first;
};

auto counting(const std::shared_ptr<outcome>& o) {
  return [o](servekit::response&& r) {
    if (o->calls.fetch_add(1) == 0) {
      o->first.set_value(std::move(r));
    }
  };
}

servekit::model_options named(std::string name) {
  servekit::model_options o;
  o.name = std::move(name);
  return o;
}

TEST(SubmitAnsweringRefusals, AnAcceptedRequestIsAnsweredThroughTheCallback) {
  servekit::model<echo_backend> m{named("echo")};
  auto o = std::make_shared<outcome>();
  auto answer = o->first.get_future();
  const auto s = servekit::submit_answering_refusals(
      m, servekit::request_builder{"a"}.input("X", {1}, {7}).build(), counting(o));
  EXPECT_TRUE(s.ok()) << s.message();
  const servekit::response r = answer.get();
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.output("Y").values<std::int32_t>()[0], 7);
  m.shutdown(servekit::shutdown_mode::drain);
  EXPECT_EQ(o->calls.load(), 1);
}

TEST(SubmitAnsweringRefusals, ARefusedRequestIsAnsweredThroughTheCallbackToo) {
  servekit::model<echo_backend> m{named("echo")};
  auto o = std::make_shared<outcome>();
  auto answer = o->first.get_future();
  // An input the model does not have: refused at submit, before any queue.
  const auto s = servekit::submit_answering_refusals(
      m, servekit::request_builder{"b"}.input("Z", {1}, {7}).build(), counting(o));
  EXPECT_EQ(s.code(), servekit::status_code::invalid_argument);
  ASSERT_EQ(answer.wait_for(std::chrono::seconds{0}), std::future_status::ready)
      << "the refusal is answered before submit_answering_refusals returns";
  const servekit::response r = answer.get();
  EXPECT_EQ(r.status.code(), servekit::status_code::invalid_argument);
  EXPECT_EQ(r.status.message(), s.message());
  EXPECT_EQ(r.id, "b");
  EXPECT_TRUE(r.final);
  m.shutdown(servekit::shutdown_mode::drain);
  EXPECT_EQ(o->calls.load(), 1);
}

} // namespace submit_answering_test
