// bench_llm_serving: the threaded run behind bench_iteration's simulation. The bundled LibTorch
// transformer (examples/models/tiny_lm, servekit::libtorch::causal_lm) is served over HTTP by
// servekit's server in this process, once per policy, on a scaled-down Azure conversation trace
// (the first --seconds, prompts halved and capped at 1024 tokens, outputs capped at 256); each
// request
// is a client thread streaming /v2/models/tiny_lm/generate_stream, timing its first token and
// the tokens after it. The same process fits the step-time model on tiny_lm
// (harness/libtorch_steps.hpp) and replays the same arrivals through the simulated shell: the
// measured goodput of each policy is printed beside the simulated one, and `ranking_matches`
// says whether they order the policies the same way.
//
// Goodput: completed requests per second meeting MLPerf's interactive pair (TTFT <= 450 ms, TPOT
// <= 40 ms). The arrival rate is the trace's times the scale at which the simulation says vLLM-FCFS
// attains about 90 % (a loaded server, where request-level batching already falls behind).

#include "harness/azure_trace.hpp"
#include "harness/command_line.hpp"
#include "harness/iteration_replay.hpp"
#include "harness/libtorch_steps.hpp"
#include "harness/machine.hpp"
#include "harness/measure.hpp"
#include "harness/report.hpp"
#include "harness/step_model.hpp"

#include <servekit/http/server.hpp>
#include <servekit/libtorch/causal_lm.hpp>
#include <servekit/repository/backend_list.hpp>
#include <servekit/repository/model_repository.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using servekit_bench::interactive;
using servekit_bench::policy;
using servekit_bench::trace_request;

using backends =
    servekit::backend_list<servekit::named_backend<"causal_lm", servekit::libtorch::causal_lm>>;

/// The trace's first requests with their lengths scaled down to what a CPU model serves.
std::vector<trace_request> scaled_down(std::vector<trace_request> requests) {
  for (auto& r : requests) {
    r.prompt = std::clamp<std::uint32_t>(r.prompt / 2, 1, 1024);
    r.output = std::clamp<std::uint32_t>(r.output, 1, 256);
  }
  return requests;
}

/// tiny_lm's config with `p`'s scheduler knobs.
std::string config_of(const servekit::iteration_batching_options& o) {
  const auto parameter = [](std::string_view key, const std::string& value) {
    return fmt::format("parameters {{ key: \"{}\" value: {{ string_value: \"{}\" }} }}\n", key,
                       value);
  };
  std::string c = "backend: \"causal_lm\"\nmax_batch_size: 0\n"
                  "sequence_batching { iterative_sequence: true }\n";
  for (const auto& [k, v] : servekit_bench::tiny_lm_parameters()) {
    if (k != "max_num_batched_tokens") {
      c += parameter(k, v);
    }
  }
  c += parameter("max_num_batched_tokens", std::to_string(o.max_num_batched_tokens));
  c += parameter("batch_scheduler_policy", std::string{to_string(o.capacity)});
  c += parameter("scheduling_policy", std::string{to_string(o.order)});
  c += parameter(
      "ttft_target_ms",
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(o.ttft_target).count()));
  return c;
}

/// One streamed request: the time of each event after sending.
struct measured {
  double ttft_s = -1;
  double tpot_s = 0;
  std::uint32_t tokens = 0;
  bool ok = false;
};

/// POSTs a generate_stream request on a fresh connection and times its events.
measured stream_one(std::uint16_t port, const std::string& prompt, std::uint32_t max_tokens) {
  measured m;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return m;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string body = fmt::format(
      R"({{"text_input": "{}", "max_tokens": {}, "stream": true}})", prompt, max_tokens);
  const std::string request = fmt::format(
      "POST /v2/models/tiny_lm/generate_stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
      "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
      body.size(), body);
  const auto start = clock_type::now();
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return m;
  }
  std::string seen;
  std::size_t counted = 0;
  clock_type::time_point first{};
  clock_type::time_point last{};
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      break;
    }
    const auto now = clock_type::now();
    seen.append(buffer, static_cast<std::size_t>(n));
    for (std::size_t at = seen.find("data: ", counted); at != std::string::npos;
         at = seen.find("data: ", counted)) {
      counted = at + 6;
      if (m.tokens == 0) {
        first = now;
      }
      last = now;
      ++m.tokens;
    }
  }
  ::close(fd);
  m.ok = m.tokens == max_tokens && seen.find("\"error\"") == std::string::npos;
  if (m.tokens > 0) {
    m.ttft_s = std::chrono::duration<double>(first - start).count();
    m.tpot_s =
        m.tokens > 1 ? std::chrono::duration<double>(last - first).count() / (m.tokens - 1) : 0;
  }
  return m;
}

/// Serves tiny_lm under `p` and replays `requests` at `scale` × their rate against it.
std::vector<measured> run_threaded(const policy& p, const std::vector<trace_request>& requests,
                                   double scale, const fs::path& model_file) {
  const fs::path root =
      fs::temp_directory_path() / fmt::format("servekit-bench-llm-{}-{}", ::getpid(), p.name);
  fs::remove_all(root);
  fs::create_directories(root / "tiny_lm" / "1");
  fs::copy_file(model_file, root / "tiny_lm" / "1" / "model.pt");
  std::ofstream{root / "tiny_lm" / "config.pbtxt"} << config_of(p.options);
  std::vector<measured> out(requests.size());
  {
    servekit::model_repository repository{root, backends{}};
    for (const auto& e : repository.load_all()) {
      if (e.state != servekit::model_ready_state::ready) {
        std::fprintf(stderr, "bench_llm_serving: %s: %s\n", e.name.c_str(), e.reason.c_str());
        return out;
      }
    }
    servekit::http::server_options options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.thread_count = 1;
    servekit::http::server http{repository, std::move(options)};
    std::thread serving{[&] { http.run(); }};
    // Warm up: TorchScript's profiling executor specialises the graph over its first runs.
    for (std::size_t i = 0; i < 4; ++i) {
      (void)stream_one(http.port(), std::string(64 + 100 * i, 'w'), 32);
    }
    std::mt19937_64 rng{5};
    std::vector<std::thread> clients;
    const auto start = clock_type::now();
    for (std::size_t i = 0; i < requests.size(); ++i) {
      std::string prompt(requests[i].prompt, ' ');
      for (auto& c : prompt) {
        c = static_cast<char>('a' + rng() % 26);
      }
      std::this_thread::sleep_until(
          start + std::chrono::duration_cast<clock_type::duration>(
                      std::chrono::duration<double>(requests[i].arrival_s / scale)));
      clients.emplace_back(
          [&out, i, port = http.port(), prompt = std::move(prompt), tokens = requests[i].output] {
            out[i] = stream_one(port, prompt, tokens);
          });
    }
    for (auto& c : clients) {
      c.join();
    }
    http.stop();
    serving.join();
  }
  fs::remove_all(root);
  return out;
}

/// Requests per second meeting `target`, over the arrivals' span.
double goodput_of(const std::vector<measured>& runs, servekit_bench::slo target, double span_s,
                  double& attainment) {
  std::size_t met = 0;
  for (const auto& m : runs) {
    met += m.ok && m.ttft_s <= target.ttft_s && m.tpot_s <= target.tpot_s ? 1U : 0U;
  }
  attainment = runs.empty() ? 0 : static_cast<double>(met) / static_cast<double>(runs.size());
  return span_s > 0 ? static_cast<double>(met) / span_s : 0;
}

/// The policies' names, best goodput first.
std::string ranking(const std::vector<policy>& all, const std::vector<double>& goodput) {
  std::vector<std::size_t> order(all.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return goodput[a] > goodput[b]; });
  std::string out;
  for (const auto i : order) {
    out += (out.empty() ? "" : " > ") + std::string{all[i].name};
  }
  return out;
}

/// Whether the threaded run orders every pair of policies the simulation separates by more
/// than 10 % the same way (pairs the simulation calls even are not judged: the threaded run
/// is noisy).
bool same_ranking(const std::vector<double>& simulated, const std::vector<double>& threaded) {
  for (std::size_t i = 0; i < simulated.size(); ++i) {
    for (std::size_t j = 0; j < simulated.size(); ++j) {
      if (simulated[i] > simulated[j] * 1.1 && !(threaded[i] > threaded[j])) {
        return false;
      }
    }
  }
  return true;
}

} // namespace

int main(int argc, char** argv) {
  bool json = false;
  bool quick = false;
  double seconds = 40;
  std::string trace_dir =
      (fs::path{SERVEKIT_SOURCE_DIR}.parent_path() / "shared" / "data" / "azure-llm-2023").string();
  servekit_bench::command_line cl{"bench_llm_serving"};
  cl.json(json)
      .quick(quick, "4 s of the trace (the smoke test)")
      .text("--trace", trace_dir, {}, "folder of AzureLLMInferenceTrace_conv.csv")
      .number("--seconds", seconds, 5, 600, "seconds of the trace replayed (40)")
      .when_quick("--seconds", seconds, 4.0);
  cl.parse(argc, argv);

  const servekit_bench::machine host;
  std::printf("bench_llm_serving  cpu: %s  nproc: %u  load: %.2f%s\n", host.cpu.c_str(), host.nproc,
              host.load, quick ? "  (quick)" : "");
  const fs::path version = fs::path{SERVEKIT_SOURCE_DIR} / "examples" / "models" / "tiny_lm" / "1";
  const auto w = servekit_bench::load(trace_dir, "conv", seconds);
  const auto requests = scaled_down(w.requests);
  const double span = requests.empty() ? 0 : requests.back().arrival_s;
  std::printf("workload: %zu requests over %.0f s from %s, prompts / 2 (<= 1024), outputs <= "
              "256\n",
              requests.size(), span, w.source.c_str());
  // The step-time model, fitted on steps of this workload's lengths.
  std::vector<servekit_bench::length_pair> lengths;
  for (const auto& r : requests) {
    lengths.push_back({r.prompt, r.output});
  }
  const auto fit = servekit_bench::fit_step_model(
      servekit_bench::time_tiny_lm_steps(version, quick ? 60 : 800, lengths));
  std::printf("step model fitted on tiny_lm: t = %.0f us + %.2f us/token + %.1f us/seq + %.4f "
              "us/context token (R^2 %.3f)\n",
              fit.model.a_us, fit.model.b_us, fit.model.c_us, fit.model.d_us, fit.r2);

  auto base = servekit::read_iteration_batching(servekit_bench::tiny_lm_parameters());
  const auto all = servekit_bench::policies(fit.model, base, interactive);
  // The rate: where the simulation puts vLLM-FCFS closest to 90 % attainment.
  double scale = 1;
  double best = 2;
  for (const double s : {1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0}) {
    const auto r = servekit_bench::replay(requests, s, all[1].options, fit.model);
    const double att = r.attainment(interactive, requests.size());
    if (std::abs(att - 0.9) < best) {
      best = std::abs(att - 0.9);
      scale = s;
    }
  }
  std::printf("rate scale %g (the simulation's vLLM-FCFS attainment closest to 90 %%)\n\n", scale);

  servekit_bench::report figures;
  std::vector<double> simulated;
  std::vector<double> threaded;
  std::uint64_t wrong = 0;
  std::printf("  %-14s %12s %12s %10s %10s %10s\n", "policy", "simulated", "threaded", "attain",
              "ttft_p50", "tpot_p50");
  for (const auto& p : all) {
    const auto sim = servekit_bench::replay(requests, scale, p.options, fit.model);
    simulated.push_back(sim.goodput(interactive));
    const auto runs = run_threaded(p, requests, scale, version / "model.pt");
    double attainment = 0;
    threaded.push_back(goodput_of(runs, interactive, span / scale, attainment));
    std::vector<double> ttft;
    std::vector<double> tpot;
    for (const auto& m : runs) {
      wrong += m.ok ? 0U : 1U;
      if (m.ok) {
        ttft.push_back(m.ttft_s);
        tpot.push_back(m.tpot_s);
      }
    }
    std::printf("  %-14s %12.3f %12.3f %10.3f %10.3f %10.4f\n", p.name, simulated.back(),
                threaded.back(), attainment, servekit_bench::percentile(ttft, 0.5),
                servekit_bench::percentile(tpot, 0.5));
    figures.put(std::string{"simulated_goodput_"} + p.name, simulated.back());
    figures.put(std::string{"threaded_goodput_"} + p.name, threaded.back());
    figures.put(std::string{"threaded_attainment_"} + p.name, attainment);
  }
  const std::string sim_rank = ranking(all, simulated);
  const std::string real_rank = ranking(all, threaded);
  std::printf("\n  simulated ranking: %s\n  threaded ranking:  %s\n", sim_rank.c_str(),
              real_rank.c_str());
  figures.put("rate_scale", scale);
  figures.put("fit_r2", fit.r2);
  figures.row("ranking_matches", same_ranking(simulated, threaded) ? 1 : 0,
              "1: the threaded run orders the policies the simulation separates (> 10 %) alike");
  figures.ratio("threaded_iteration_vs_request", "threaded_goodput_vllm_fcfs",
                "threaded_goodput_request_level");
  if (json) {
    figures.put_run(quick, host, wrong);
    figures.print_json();
  }
  return wrong == 0 ? 0 : 1;
}
