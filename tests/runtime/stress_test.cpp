// Exactly-once completion under fire: several submitting threads, random priorities, timeouts
// (REJECT and DELAY), shapes, batch sizes, cancellations, a bounded queue and injected backend
// failures, ended by a shutdown. Every accepted request must get exactly one final response;
// every refused one none. Runs in CI under ASan+UBSan and TSan.
#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace stress_test {

using servekit::data_type;
using servekit::shape;

/// Echoes INPUT (FP32, variable length) and fails on purpose now and then: it throws for a
/// batch whose first value is 13, and marks a request whose value is 7 as failed.
struct unreliable_backend {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT", data_type::fp32, {-1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT", data_type::fp32, {-1}}};

  explicit unreliable_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    if (b.request(0).find_input("INPUT")->values<float>()[0] == 13.0F) {
      throw std::runtime_error("injected failure");
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("INPUT");
      if (in.values<float>()[0] == 7.0F) {
        b.response(i).status = servekit::internal_error("injected per-request failure");
        continue;
      }
      auto& out = b.response(i).add_output("OUTPUT", data_type::fp32, in.shape);
      std::copy(in.values<float>().begin(), in.values<float>().end(), out.values<float>().begin());
    }
  }
};

struct ledger {
  std::mutex mutex;
  std::vector<int> finals;   // per request index
  std::vector<int> partials; // must stay 0: the backend is not decoupled
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
};

servekit::model_options stress_options() {
  servekit::model_options o;
  o.name = "unreliable";
  servekit::dynamic_batching_options d;
  d.preferred_batch_size = {4};
  d.max_queue_delay_microseconds = 200;
  d.priority.priority_levels = 2;
  d.priority.default_priority_level = 2;
  servekit::queue_policy level1;
  level1.timeout_action = servekit::timeout_action::reject;
  level1.allow_timeout_override = true;
  level1.default_timeout_microseconds = 400;
  servekit::queue_policy level2;
  level2.timeout_action = servekit::timeout_action::delay;
  level2.default_timeout_microseconds = 300;
  level2.max_queue_size = 64;
  d.priority.priority_queue_policy = {{1, level1}, {2, level2}};
  o.dynamic_batching = d;
  return o;
}

void run_stress(servekit::shutdown_mode ending) {
  constexpr int threads = 4;
  constexpr int per_thread = 1500;
  auto book = std::make_shared<ledger>();
  book->finals.assign(threads * per_thread, 0);
  book->partials.assign(threads * per_thread, 0);
  std::atomic<int> accepted{0};
  std::atomic<int> refused{0};

  using model_t =
      servekit::model<unreliable_backend, servekit::dynamic_batcher<>, servekit::instance_group<2>>;
  auto m = std::make_unique<model_t>(stress_options());

  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng{static_cast<unsigned>(1234 + t)};
      std::uniform_int_distribution<int> percent{0, 99};
      for (int i = 0; i < per_thread; ++i) {
        const int index = t * per_thread + i;
        const auto length = static_cast<std::int64_t>(1 + percent(rng) % 3);
        const auto batch = static_cast<std::int64_t>(1 + percent(rng) % 2);
        servekit::request r;
        r.id = std::to_string(index);
        r.priority = static_cast<std::uint64_t>(percent(rng) % 4); // 0 and 3 mean the default
        r.timeout_us = percent(rng) < 30 ? static_cast<std::uint64_t>(50 + percent(rng)) : 0;
        auto in = servekit::make_tensor("INPUT", data_type::fp32, shape{batch, length});
        const int roll = percent(rng);
        const float value = roll < 3 ? 13.0F : roll < 6 ? 7.0F : 1.0F;
        for (auto& v : in.values<float>()) {
          v = value;
        }
        r.inputs.push_back(std::move(in));
        servekit::cancellation_source source;
        const bool cancel = percent(rng) < 5;
        if (cancel) {
          r.cancellation = source.token();
        }
        auto s = m->submit(std::move(r), [book, index](servekit::response&& resp) {
          const std::lock_guard lock{book->mutex};
          if (!resp.final) {
            ++book->partials[static_cast<std::size_t>(index)];
            return;
          }
          ++book->finals[static_cast<std::size_t>(index)];
          (resp.ok() ? book->ok : book->failed).fetch_add(1);
        });
        (s.ok() ? accepted : refused).fetch_add(1);
        if (s.ok() && cancel) {
          m->cancel(source);
        }
      }
    });
  }
  for (auto& c : clients) {
    c.join();
  }
  // On a loaded machine the instances may not have run yet; let one batch succeed before a
  // cancelling shutdown, so that the ledger sees both outcomes (bounded: never hangs).
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (book->ok.load() == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  m->shutdown(ending);
  const auto stats = m->statistics();
  m.reset();

  const std::lock_guard lock{book->mutex};
  int answered = 0;
  for (std::size_t i = 0; i < book->finals.size(); ++i) {
    ASSERT_LE(book->finals[i], 1) << "request " << i << " got " << book->finals[i] << " finals";
    ASSERT_EQ(book->partials[i], 0) << "request " << i;
    answered += book->finals[i];
  }
  EXPECT_EQ(answered, accepted.load()) << "every accepted request answered exactly once";
  EXPECT_EQ(accepted.load() + refused.load(), threads * per_thread);
  EXPECT_EQ(book->ok.load() + book->failed.load(), accepted.load());
  EXPECT_EQ(stats.success.count, static_cast<std::uint64_t>(book->ok.load()));
  // Refusals at submit (a full level) count as REJECTED failures, as in Triton.
  EXPECT_EQ(stats.fail.count, static_cast<std::uint64_t>(book->failed.load() + refused.load()));
  EXPECT_EQ(stats.pending_request_count, 0U);
  EXPECT_GT(book->ok.load(), 0);
  EXPECT_GT(book->failed.load(), 0); // the injected failures happened
}

TEST(stress, exactly_once_with_draining_shutdown) { run_stress(servekit::shutdown_mode::drain); }

TEST(stress, exactly_once_with_cancelling_shutdown) { run_stress(servekit::shutdown_mode::cancel); }

} // namespace stress_test
