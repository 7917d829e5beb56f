// bench_cache: the response cache against executing the model, in one process.
//
// latency: one client submits the same request again and again to an identity model (OUTPUT0 =
//   INPUT0, FP32 [N], dynamic batcher, one instance), once without a cache (every request is
//   handed to the instance thread and executed) and once with `response_cache { enable: true }`
//   (every request after the first is a hit, answered on the client's thread). Median and p99
//   of submit-to-response, for a small (64 B) and a large (64 KiB) tensor, and the ratio.
// lookups: threads looking up cached keys directly (response_cache::lookup), with 1 shard and
//   with 8, in lookups per second: what the lock costs under contention.
//
// Prints human-readable lines; --json prints every figure as one JSON object on the last line.
// --quick: fewer samples (the smoke test). See docs/response-cache.md, "Figures".
#include "harness/command_line.hpp"
#include "harness/machine.hpp"
#include "harness/measure.hpp"
#include "harness/report.hpp"

#include <servekit/cache.hpp>
#include <servekit/runtime/model.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

using servekit::data_type;
using servekit::shape;

struct identity_backend {
  static constexpr std::int32_t max_batch_size = 32;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT0", data_type::fp32, {-1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT0", data_type::fp32, {-1}}};
  explicit identity_backend(const servekit::instance_context&) {}
  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("INPUT0");
      auto& out = b.response(i).add_output("OUTPUT0", data_type::fp32, in.shape);
      std::memcpy(out.data.data(), in.data.data(), in.data.size());
    }
  }
};

using identity_model = servekit::model<identity_backend, servekit::dynamic_batcher<>>;

servekit::request make_request(std::int64_t n) {
  servekit::request r;
  r.id = "r";
  const std::vector<float> v(static_cast<std::size_t>(n), 1.5F);
  r.inputs.push_back(
      servekit::make_tensor("INPUT0", data_type::fp32, shape{1, n}, std::span<const float>{v}));
  return r;
}

struct latency {
  double p50_us = 0;
  double p99_us = 0;
  std::uint64_t wrong = 0;
};

latency measure(identity_model& m, std::int64_t n, int samples) {
  // The first tenth warms up (and fills the cache); building a request is not timed.
  const servekit_bench::timed_calls calls = servekit_bench::time_prepared_calls(
      samples / 10, samples, [n](std::uint64_t) { return make_request(n); },
      [&m](servekit::request&& r) {
        const servekit::response res = m.infer(std::move(r)).get();
        return res.ok() && res.outputs.size() == 1 && res.outputs[0].values<float>()[0] == 1.5F;
      });
  return {servekit_bench::median(calls.us), servekit_bench::percentile(calls.us, 0.99),
          calls.wrong};
}

servekit::model_options options(bool cached) {
  servekit::model_options o;
  o.name = "identity";
  o.dynamic_batching = servekit::dynamic_batching_options{};
  o.response_cache = servekit::response_cache_options{cached};
  return o;
}

std::shared_ptr<servekit::response_cache> make_cache(std::size_t shards) {
  servekit::response_cache_settings s;
  s.size_bytes = 64U << 20U;
  s.shards = shards;
  return std::make_shared<servekit::response_cache>(s);
}

/// Lookups per second over `threads` threads hitting 64 cached keys of 64 bytes.
double lookups_per_second(std::size_t shards, int threads, double seconds, std::uint64_t& wrong) {
  auto cache = make_cache(shards);
  std::vector<servekit::cache_key> keys;
  for (int k = 0; k < 64; ++k) {
    auto r = make_request(16);
    r.inputs[0].values<float>()[0] = static_cast<float>(k);
    keys.push_back(*servekit::cache_key::of("identity", 1, r));
    servekit::tensor_list out;
    out.push_back(std::move(r.inputs[0]));
    cache->insert(keys.back(), out);
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> total{0};
  std::atomic<int> bad{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::uint64_t n = 0;
      std::size_t k = static_cast<std::size_t>(t) * 7;
      while (!stop.load(std::memory_order_relaxed)) {
        const auto hit = cache->lookup(keys[k % keys.size()]);
        if (!hit || (*hit)[0].values<float>()[0] != static_cast<float>(k % keys.size())) {
          ++bad;
        }
        ++k;
        ++n;
      }
      total += n;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& w : workers) {
    w.join();
  }
  wrong += static_cast<std::uint64_t>(bad.load());
  return static_cast<double>(total.load()) / seconds;
}

} // namespace

int main(int argc, char** argv) {
  bool json = false;
  bool quick = false;
  servekit_bench::command_line{"bench_cache"}
      .json(json)
      .quick(quick, "fewer samples (the smoke test)")
      .parse(argc, argv);
  const int samples = quick ? 2000 : 20000;
  const double seconds = quick ? 0.2 : 1.0;
  std::uint64_t wrong = 0;
  servekit_bench::report figures{"{:.3f}"};

  const servekit_bench::machine host;
  std::printf("bench_cache  cpu: %s  load: %.2f\n", host.cpu.c_str(), host.load);
  for (const std::int64_t n : {std::int64_t{16}, std::int64_t{16384}}) {
    identity_model executed{options(false), {}, {}};
    identity_model cached{options(true), {}, {nullptr, make_cache(1)}};
    const latency e = measure(executed, n, samples);
    const latency h = measure(cached, n, samples);
    wrong += e.wrong + h.wrong;
    const std::string tag = n == 16 ? "64B" : "64KiB";
    figures.row("execute_" + tag + "_p50_us", e.p50_us);
    figures.row("execute_" + tag + "_p99_us", e.p99_us);
    figures.row("hit_" + tag + "_p50_us", h.p50_us);
    figures.row("hit_" + tag + "_p99_us", h.p99_us);
    figures.row("execute_over_hit_" + tag + "_p50", servekit_bench::ratio_of(e.p50_us, h.p50_us));
  }
  for (const std::size_t shards : {std::size_t{1}, std::size_t{8}}) {
    for (const int threads : {1, 2, 4}) {
      figures.row("lookups_per_s_shards" + std::to_string(shards) + "_threads" +
                      std::to_string(threads),
                  lookups_per_second(shards, threads, seconds, wrong));
    }
  }
  figures.row("wrong_answers", static_cast<double>(wrong));
  if (json) {
    figures.print_json();
  }
  return wrong == 0 ? 0 : 1;
}
