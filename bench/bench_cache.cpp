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
#include "bench_support.hpp"

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
  static constexpr servekit::tensor_spec inputs[] = {{"INPUT0", data_type::fp32, {-1}}};
  static constexpr servekit::tensor_spec outputs[] = {{"OUTPUT0", data_type::fp32, {-1}}};
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
  int wrong = 0;
};

latency measure(identity_model& m, std::int64_t n, int samples) {
  latency out;
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(samples));
  for (int i = 0; i < samples + samples / 10; ++i) {
    auto r = make_request(n);
    const auto t0 = std::chrono::steady_clock::now();
    const servekit::response res = m.infer(std::move(r)).get();
    const auto t1 = std::chrono::steady_clock::now();
    if (!res.ok() || res.outputs.size() != 1 || res.outputs[0].values<float>()[0] != 1.5F) {
      ++out.wrong;
    }
    if (i >= samples / 10) { // the first tenth warms up (and fills the cache)
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  }
  out.p50_us = bench_support::median(us);
  out.p99_us = bench_support::percentile(us, 0.99);
  return out;
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
double lookups_per_second(std::size_t shards, int threads, double seconds, int& wrong) {
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
  wrong += bad.load();
  return static_cast<double>(total.load()) / seconds;
}

} // namespace

int main(int argc, char** argv) {
  bool json = false;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a{argv[i]};
    if (a == "--json") {
      json = true;
    } else if (a == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: bench_cache [--quick] [--json]\n");
      return 2;
    }
  }
  const int samples = quick ? 2000 : 20000;
  const double seconds = quick ? 0.2 : 1.0;
  int wrong = 0;
  std::string figures;
  auto figure = [&](const char* name, double value) {
    std::printf("%-34s %12.3f\n", name, value);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s\"%s\": %.3f", figures.empty() ? "" : ", ", name, value);
    figures += buf;
  };

  std::printf("bench_cache  cpu: %s  load: %.2f\n", bench_support::cpu_model().c_str(),
              bench_support::load_average());
  for (const std::int64_t n : {std::int64_t{16}, std::int64_t{16384}}) {
    identity_model executed{options(false), {}, {}};
    identity_model cached{options(true), {}, {nullptr, make_cache(1)}};
    const latency e = measure(executed, n, samples);
    const latency h = measure(cached, n, samples);
    wrong += e.wrong + h.wrong;
    const std::string tag = n == 16 ? "64B" : "64KiB";
    figure(("execute_" + tag + "_p50_us").c_str(), e.p50_us);
    figure(("execute_" + tag + "_p99_us").c_str(), e.p99_us);
    figure(("hit_" + tag + "_p50_us").c_str(), h.p50_us);
    figure(("hit_" + tag + "_p99_us").c_str(), h.p99_us);
    figure(("execute_over_hit_" + tag + "_p50").c_str(), h.p50_us > 0 ? e.p50_us / h.p50_us : 0);
  }
  for (const std::size_t shards : {std::size_t{1}, std::size_t{8}}) {
    for (const int threads : {1, 2, 4}) {
      const std::string name =
          "lookups_per_s_shards" + std::to_string(shards) + "_threads" + std::to_string(threads);
      figure(name.c_str(), lookups_per_second(shards, threads, seconds, wrong));
    }
  }
  figure("wrong_answers", wrong);
  if (json) {
    std::printf("{%s}\n", figures.c_str());
  }
  return wrong == 0 ? 0 : 1;
}
