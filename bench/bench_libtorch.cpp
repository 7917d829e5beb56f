// bench_libtorch: the LibTorch backend serving an image classifier on the CPU, against calling
// torch directly, in one process.
//
//     bench_libtorch [--json] [--quick] [--seconds N]
//
// The model: the bundled repository's image_classifier (examples/models/image_classifier:
// config.pbtxt + 1/model.pt, as servekit-server serves it): an 8x8 image, a 3x3 convolution to 4
// channels, ReLU, 2x2 max pooling, a linear layer to 10 classes (seeded weights), served by a
// model_repository with the `pytorch` backend: dynamic batching without queue delay,
// max_batch_size 32, 2 instances of 1 intra-op thread each.
//
// direct    module.forward on one [1, 1, 8, 8] request in a loop (the floor): direct_p50_us.
// served    the same request through the repository's model, one at a time, with infer_sync:
//           served_p50_us. The LibTorch backend declares execute_on_any_thread, so the caller
//           holds a free instance and runs the batch on its own thread. Goal: served <= 1.05 x
//           direct + one pingpong_us (a condition_variable hand-off).
//           served_handoff_p50_us: the same through the instances' threads (submit, then
//           infer_sync's wait: watch for the response for 50 us, then sleep).
//           served_cv_p50_us: submit, and a client that sleeps on a condition_variable at once.
//           The four take turns in blocks of 50 calls, so that the machine's drifting speed
//           falls on each alike.
// load      64 requests in flight: served_rps (dynamic batching) against direct_rps (the same
//           offered load served first come first served by as many threads as cores, each
//           calling forward on one request at a time with a module of its own); p99 of each
//           includes the wait for a thread. Goal: served_rps >= 3 x direct_rps at equal or lower
//           p99.
//
// profile   module.forward at batch sizes 1 to 32 (medians), fitted as a + c * b: the latency
//           profile bench_adaptive's `libtorch` backend uses (batch_fixed_us, batch_per_element_us,
//           batch_fit_r2; docs/adaptive-batching.md).
//
// The last line with --json is one JSON object with every figure. See docs/benchmarks.md.
#include "harness/command_line.hpp"
#include "harness/machine.hpp"
#include "harness/measure.hpp"
#include "harness/report.hpp"

#include <servekit/libtorch/backend.hpp>
#include <servekit/repository.hpp>
#include <servekit/runtime/capacity_planner.hpp>
#include <servekit/runtime/detail/infer.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace {

using servekit_bench::bench_clock;

constexpr int in_flight = 64;

/// The bundled classifier's folder (config.pbtxt, 1/model.pt).
const std::filesystem::path bundled_classifier =
    std::filesystem::path{SERVEKIT_SOURCE_DIR} / "examples" / "models" / "image_classifier";

/// A temporary repository holding a copy of the bundled classifier (the rest of examples/models
/// needs the example server's backends), removed at the end.
struct repository_folder {
  std::filesystem::path root = std::filesystem::temp_directory_path() /
                               ("servekit-bench-libtorch-" + std::to_string(::getpid()));
  repository_folder() {
    std::filesystem::create_directories(root);
    std::filesystem::copy(bundled_classifier, root / "image_classifier",
                          std::filesystem::copy_options::recursive);
  }
  repository_folder(const repository_folder&) = delete;
  repository_folder& operator=(const repository_folder&) = delete;
  ~repository_folder() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
};

servekit::request image_request() {
  servekit::request r;
  r.id = "image";
  auto t = servekit::make_tensor("INPUT__0", servekit::data_type::fp32, {1, 1, 8, 8});
  float v = 0.0F;
  for (auto& x : t.values<float>()) {
    x = (v += 0.01F);
  }
  r.inputs.push_back(std::move(t));
  return r;
}

bool right(const servekit::response& r) {
  const servekit::tensor* out = r.find_output("OUTPUT__0");
  return r.ok() && out != nullptr && out->shape == servekit::shape{1, 10};
}

/// The model as a servable with submit only: infer_sync_with then waits for a response that the
/// instances' threads execute (the path every asynchronous client takes), where the model's own
/// infer_sync would run the batch on the caller's thread.
struct through_instances {
  servekit::model_ref model;
  [[nodiscard]] servekit::status submit(servekit::request&& r, servekit::response_sink sink) const {
    return model.submit(std::move(r), std::move(sink));
  }
};

/// One request through the model, waiting on a condition_variable (what a synchronous client
/// of an asynchronous API writes).
/// Also records when the response reached the callback (on the instance thread), before the
/// hand-off back: submit-to-callback is the request path and the backend without the client's
/// wake-up.
struct waiter {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  bool ok = false;
  std::vector<double> to_callback_us;

  bool call(servekit::model_ref m) {
    {
      const std::lock_guard lock{mutex};
      done = false;
    }
    const auto start = bench_clock::now();
    const auto s = m.submit(image_request(), [this, start](servekit::response&& r) {
      const auto reached = bench_clock::now();
      const bool good = right(r);
      const std::lock_guard lock{mutex};
      to_callback_us.push_back(servekit_bench::us_between(start, reached));
      ok = good;
      done = true;
      cv.notify_one();
    });
    if (!s.ok()) {
      return false;
    }
    std::unique_lock lock{mutex};
    cv.wait(lock, [this] { return done; });
    return ok;
  }
};

struct load_result {
  double rps = 0;
  double p99_us = 0;
  double mean_batch = 0;
  std::uint64_t wrong = 0;
};

/// 64 requests in flight through the model (one client thread per core), for `seconds`.
load_result served_load(servekit::model_ref m, unsigned clients, double seconds) {
  std::mutex mutex;
  std::vector<double> latencies; // guarded by mutex
  const auto result = servekit_bench::closed_loop(
      static_cast<int>(clients), in_flight, std::chrono::duration<double>{seconds / 5},
      std::chrono::duration<double>{seconds},
      [&](servekit_bench::window& w, std::uint64_t) {
        const auto start = bench_clock::now();
        return m.submit(image_request(), [&, start, slots = &w](servekit::response&& r) {
          const double us = servekit_bench::us_between(start, bench_clock::now());
          {
            const std::lock_guard lock{mutex};
            latencies.push_back(us);
          }
          slots->answered(right(r));
        });
      },
      [m] {
        const auto s = m.statistics();
        return servekit_bench::batch_counters{s.inference_count, s.execution_count};
      });
  const std::lock_guard lock{mutex};
  return {result.rps, servekit_bench::percentile(latencies, 0.99), result.mean_batch, result.wrong};
}

/// The same offered load without servekit: 64 requests in flight (each resubmitted the moment
/// it is answered), served first come first served by `threads` threads calling forward on one
/// request at a time, each with its own module. A request's latency counts its wait for a
/// thread, as the served figure counts its wait in the queue.
load_result direct_load(const torch::jit::Module& module, unsigned threads, double seconds) {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<bench_clock::time_point> submitted(in_flight, bench_clock::now()); // guarded
  bool stop = false;                                                            // guarded
  bool measuring = false;                                                       // guarded
  std::uint64_t answered = 0;                                                   // guarded
  std::vector<double> latencies;                                                // guarded
  std::vector<std::thread> workers;
  // Cloned here, one after the other: Module::clone of one module from several threads at once
  // corrupts the heap (LibTorch 1.13).
  std::vector<torch::jit::Module> modules;
  for (unsigned t = 0; t < threads; ++t) {
    modules.push_back(module.clone());
  }
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      at::set_num_threads(1); // as the served instances run (INTRA_OP_THREAD_COUNT 1)
      torch::jit::Module& own = modules[t];
      const c10::InferenceMode inference;
      auto request = image_request();
      for (;;) {
        bench_clock::time_point since;
        {
          std::unique_lock lock{mutex};
          ready.wait(lock, [&] { return stop || !submitted.empty(); });
          if (stop) {
            return;
          }
          since = submitted.front();
          submitted.pop_front();
        }
        std::vector<c10::IValue> arguments{
            at::from_blob(request.inputs[0].data.data(), {1, 1, 8, 8}, at::kFloat)};
        const at::Tensor out = own.forward(arguments).toTensor();
        const auto done = bench_clock::now();
        const std::lock_guard lock{mutex};
        if (measuring && out.size(1) == 10) {
          ++answered;
          latencies.push_back(servekit_bench::us_between(since, done));
        }
        submitted.push_back(done); // the client's next request
        ready.notify_one();
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>{seconds / 5});
  bench_clock::time_point t0;
  {
    const std::lock_guard lock{mutex};
    measuring = true;
    t0 = bench_clock::now();
  }
  std::this_thread::sleep_for(std::chrono::duration<double>{seconds});
  load_result out;
  {
    const std::lock_guard lock{mutex};
    stop = true;
    out.rps =
        static_cast<double>(answered) / servekit_bench::seconds_between(t0, bench_clock::now());
    out.p99_us = servekit_bench::percentile(latencies, 0.99);
    out.mean_batch = 1.0;
  }
  ready.notify_all();
  for (auto& w : workers) {
    w.join();
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  bool json = false;
  bool quick = false;
  double seconds = 5;
  servekit_bench::command_line{"bench_libtorch"}
      .json(json)
      .quick(quick, "fewer samples, 1 s windows (the smoke test)")
      .window_seconds(seconds)
      .parse(argc, argv);
  const int samples = quick ? 500 : 5000;
  const servekit_bench::machine host;
  std::printf("bench_libtorch  cpu: %s  cores: %u  load: %.2f\n", host.cpu.c_str(), host.nproc,
              host.load);
  servekit_bench::report figures{"{:.3f}"};
  std::uint64_t wrong = 0;

  // The same file the served model loads, for the direct figures.
  torch::jit::Module module = torch::jit::load((bundled_classifier / "1" / "model.pt").string());
  module.eval();
  const repository_folder folder;
  servekit::model_repository repo{
      folder.root,
      servekit::backend_list<servekit::named_backend<"pytorch", servekit::libtorch::backend>>{}};
  const auto index = repo.load_all();
  const auto model = repo.find("image_classifier");
  if (model == nullptr) {
    std::fprintf(stderr, "bench_libtorch: the classifier did not load: %s\n",
                 index.empty() ? "" : index[0].reason.c_str());
    return 1;
  }

  figures.row("pingpong_us", servekit_bench::pingpong_us(quick ? 2000 : 20000, std::nullopt),
              "condition_variable hand-off, one way, median");
  // The served request's last hand-off wakes the client on whichever CPU it sleeps: often the
  // other one, where a wake-up costs what pingpong_cross_us measures (an interprocessor
  // interrupt), while the kernel tends to keep pingpong_us's two threads on one CPU.
  if (host.nproc >= 2) {
    figures.row("pingpong_cross_us",
                servekit_bench::pingpong_us(quick ? 2000 : 20000,
                                            std::pair<std::size_t, std::size_t>{0, 1}),
                "the same, the two threads on CPUs 0 and 1");
  }

  {
    // One intra-op thread, as the served instances run (INTRA_OP_THREAD_COUNT 1; OpenMP keeps the
    // count per calling thread).
    at::set_num_threads(1);
    torch::jit::Module own = module.clone();
    const c10::InferenceMode inference;
    auto request = image_request();
    const auto direct_call = [&](std::uint64_t) {
      std::vector<c10::IValue> arguments{
          at::from_blob(request.inputs[0].data.data(), {1, 1, 8, 8}, at::kFloat)};
      return own.forward(arguments).toTensor().size(1) == 10;
    };
    const servekit::model_ref served = model->model();
    const auto served_call = [&](std::uint64_t) {
      return right(served.infer_sync(image_request()));
    };
    const through_instances handoff{served};
    const auto served_handoff_call = [&](std::uint64_t) {
      return right(servekit::detail::infer_sync_with(handoff, image_request(),
                                                     servekit::sync_response_spin));
    };
    waiter cv_client;
    cv_client.to_callback_us.reserve(static_cast<std::size_t>(samples) * 2);
    const auto served_cv_call = [&](std::uint64_t) { return cv_client.call(served); };

    // The four take turns in blocks of 50 calls, so that a slow spell of this shared machine
    // (forward alone drifts between 11 and 18 us in spells of milliseconds) falls on each of them
    // alike: the goal compares them.
    constexpr int block = 50;
    servekit_bench::timed_calls direct;
    servekit_bench::timed_calls served_sync;
    servekit_bench::timed_calls served_handoff;
    servekit_bench::timed_calls served_cv;
    const auto take = [&](servekit_bench::timed_calls& into, const servekit_bench::timed_calls& c) {
      into.us.insert(into.us.end(), c.us.begin(), c.us.end());
      into.wrong += c.wrong;
    };
    // Context switches per call (every thread of the process), a figure this machine's noise
    // leaves alone: each one is a thread that slept or was pushed off its CPU.
    double sync_switches = 0;
    double handoff_switches = 0;
    double cv_switches = 0;
    const auto switches_during = [](auto&& run) {
      const double before = servekit_bench::process_usage::now().switches;
      run();
      return servekit_bench::process_usage::now().switches - before;
    };
    for (int round = 0; round < samples / block; ++round) {
      const int warmup = round == 0 ? block : 0;
      take(direct, servekit_bench::time_calls(warmup, block, direct_call));
      sync_switches += switches_during(
          [&] { take(served_sync, servekit_bench::time_calls(warmup, block, served_call)); });
      handoff_switches += switches_during([&] {
        take(served_handoff, servekit_bench::time_calls(warmup, block, served_handoff_call));
      });
      cv_switches += switches_during(
          [&] { take(served_cv, servekit_bench::time_calls(warmup, block, served_cv_call)); });
    }
    const auto per_call = [&](double switches) { // over the timed calls and the warm-up block
      return switches / static_cast<double>(served_sync.us.size() + block);
    };
    wrong += direct.wrong + served_sync.wrong + served_handoff.wrong + served_cv.wrong;
    figures.row("direct_p50_us", servekit_bench::percentile(direct.us, 0.5),
                "module.forward, one request");
    figures.row("served_p50_us", servekit_bench::percentile(served_sync.us, 0.5),
                "through model<>, one at a time (infer_sync: on the caller's thread)");
    figures.row("served_overhead_us", figures.get("served_p50_us") - figures.get("direct_p50_us"),
                "served_p50_us - direct_p50_us");
    figures.row("served_switches_per_call", per_call(sync_switches),
                "context switches per infer_sync call, all threads");
    figures.row("served_handoff_p50_us", servekit_bench::percentile(served_handoff.us, 0.5),
                "the same on the instances' threads, the caller watching (submit + wait)");
    figures.row("served_handoff_switches_per_call", per_call(handoff_switches));
    figures.row("served_cv_p50_us", servekit_bench::percentile(served_cv.us, 0.5),
                "the same, the client asleep on a condition_variable");
    figures.row("served_cv_switches_per_call", per_call(cv_switches));
    figures.row("served_to_callback_p50_us",
                servekit_bench::percentile(cv_client.to_callback_us, 0.5),
                "submit to the response callback, before that client's wake-up");

    // The latency profile by batch size, fitted as the capacity planner fits a server's batch
    // statistics (the same least squares).
    std::vector<servekit::batch_time> profile;
    for (const std::int64_t size : {1, 2, 4, 8, 16, 32}) {
      std::vector<float> rows(static_cast<std::size_t>(size) * 64);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        rows[i] = request.inputs[0].values<float>()[i % 64];
      }
      const auto timed = servekit_bench::time_calls(samples / 20, samples / 5, [&](std::uint64_t) {
        std::vector<c10::IValue> arguments{at::from_blob(rows.data(), {size, 1, 8, 8}, at::kFloat)};
        return own.forward(arguments).toTensor().size(0) == size;
      });
      wrong += timed.wrong;
      profile.push_back({size, timed.us.size(), servekit_bench::percentile(timed.us, 0.5)});
    }
    std::printf("forward by batch size (p50 us):");
    for (const auto& row : profile) {
      std::printf(" %lld: %.1f", static_cast<long long>(row.batch_size), row.mean_us);
    }
    std::printf("\n");
    if (const auto fit = servekit::fit_latency(profile)) {
      figures.row("batch_fixed_us", fit->fixed_us, "forward at batch b ~ a + c*b: a");
      figures.row("batch_per_element_us", fit->per_element_us, "c");
      figures.row("batch_fit_r2", fit->r2, "of the fit over batch sizes 1..32");
      figures.row("batch32_p50_us", profile.back().mean_us, "forward, one batch of 32");
    }
  }
  const unsigned cores = std::max(1U, host.nproc);
  const load_result direct = direct_load(module, cores, seconds);
  figures.row("direct_rps", direct.rps,
              "64 in flight, forward from one thread per core, one request each");
  figures.row("direct_p99_us", direct.p99_us);
  const load_result served = served_load(model->model(), cores, seconds);
  wrong += served.wrong;
  figures.row("served_rps", served.rps, "64 in flight, dynamic batching, 2 instances");
  figures.row("served_p99_us", served.p99_us);
  figures.row("mean_batch", served.mean_batch);
  figures.ratio("served_over_direct_rps", "served_rps", "direct_rps");

  servekit_bench::goals goals;
  goals.check("served_p50_us <= 1.05 x direct_p50_us + pingpong_us",
              figures.at_most("served_p50_us",
                              1.05 * figures.get("direct_p50_us") + figures.get("pingpong_us")));
  goals.check("served_rps >= 3 x direct_rps", figures.at_least("served_rps", 3 * direct.rps));
  goals.check("served_p99_us <= direct_p99_us", figures.at_most("served_p99_us", direct.p99_us));
  figures.put_run(quick, host, wrong);
  if (json) {
    figures.print_json();
  }
  return wrong == 0 ? 0 : 1;
}
