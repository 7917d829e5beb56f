// examples/add_sub: Triton's "simple" model as a servekit backend.
//
// INPUT0, INPUT1: FP32 [16]  ->  OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1.
// Dynamic batching, 2 instances. Several threads submit a burst; then the batch statistics.
#include "add_sub_backend.hpp"

#include <servekit/core/request_builder.hpp>
#include <servekit/runtime.hpp>
#include <servekit/schedule.hpp>

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <latch>
#include <thread>
#include <vector>

namespace {

// The model: which scheduler and how many instances are types; their numbers are options.
using add_sub_model =
    servekit::model<add_sub_backend, servekit::dynamic_batcher<>, servekit::instance_group<2>>;

servekit::request make_request(float base) {
  std::array<float, 16> a{};
  std::array<float, 16> b{};
  for (std::size_t k = 0; k < 16; ++k) {
    a[k] = base + static_cast<float>(k);
    b[k] = 1.0F;
  }
  // FP32 from the floats; the shape starts with the batch dimension.
  return servekit::request_builder{}
      .input("INPUT0", {1, 16}, a)
      .input("INPUT1", {1, 16}, b)
      .build();
}

} // namespace

int main() {
  servekit::model_options options;
  options.name = "add_sub";
  servekit::dynamic_batching_options batching;
  batching.preferred_batch_size = {4, 8};
  batching.max_queue_delay_microseconds = 500;
  options.dynamic_batching = batching;
  add_sub_model model{options};

  constexpr int threads = 4;
  constexpr int per_thread = 250;
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::latch done{threads * per_thread};

  std::vector<std::jthread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const float base = static_cast<float>(t * per_thread + i);
        // The sink runs on an instance thread with the request's one final response.
        auto status = model.submit(make_request(base), [&, base](servekit::response&& r) {
          if (!r.ok()) {
            std::fprintf(stderr, "failed: %s\n", r.status.message().c_str());
          }
          const bool right = r.ok() && r.find_output("OUTPUT0")->values<float>()[0] == base + 1.0F;
          (right ? ok : failed).fetch_add(1);
          done.count_down();
        });
        // A refused request (bad input, full queue) is answered here, not through the sink.
        if (!status.ok()) {
          std::fprintf(stderr, "rejected: %s\n", status.message().c_str());
          failed.fetch_add(1);
          done.count_down();
        }
      }
    });
  }
  done.wait();
  model.shutdown(servekit::shutdown_mode::drain);

  const auto stats = model.statistics();
  fmt::print("add_sub: {} ok, {} failed\n", ok.load(), failed.load());
  fmt::print("requests {}, inferences {}, executions {}, mean batch {:.2f}\n", stats.success.count,
             stats.inference_count, stats.execution_count,
             static_cast<double>(stats.inference_count) /
                 static_cast<double>(std::max<std::uint64_t>(stats.execution_count, 1)));
  for (const auto& b : stats.batch_stats) {
    fmt::print("  batch size {:2}: {} executions\n", b.batch_size, b.compute_infer.count);
  }
  for (const auto reason : servekit::all_batch_close_reasons) {
    if (const auto n = stats.closed_by(reason); n != 0) {
      fmt::print("  closed by {}: {}\n", servekit::to_string(reason), n);
    }
  }
  for (const auto& in : stats.instances) {
    fmt::print("  instance {}: {} executions\n", in.name, in.execution_count);
  }
  return failed.load() == 0 ? 0 : 1;
}
