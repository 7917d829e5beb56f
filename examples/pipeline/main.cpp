// examples/pipeline: an ensemble, Triton's image pipeline in miniature.
//
//                   ┌─> classify ─> CLASSIFICATION
//   IMAGE ─> preprocess
//                   └─> segment  ─> SEGMENTATION
//
// preprocess runs first; classify and segment both read its output and run in parallel. The
// same pipeline is built twice over the same three models:
//   1. at compile time, `servekit::ensemble<...>`: the compiler checks the wiring;
//   2. from Triton's `ensemble_scheduling` JSON (models/pipeline/config.json) over models
//      registered by name, `servekit::runtime_ensemble`: the same checks run at load.
// Both forms must answer every request identically. Then
//   3. a servekit::model_repository serves both, in process and over HTTP: the program registers
//      the compile-time pipeline (with models of its own) and the three models by name; the
//      JSON pipeline of models/ is built over those.
// Exits 1 on any failure or difference. With --serve it then serves until Ctrl-C (port 8000).
//
//     pipeline [path/to/models/pipeline/config.json] [--serve]
#include "backends.hpp"

#include <servekit/config.hpp>
#include <servekit/core.hpp>
#include <servekit/ensemble.hpp>
#include <servekit/http/server.hpp>
#include <servekit/metrics.hpp>
#include <servekit/repository.hpp>
#include <servekit/runtime.hpp>
#include <servekit/schedule.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#ifndef SERVEKIT_EXAMPLE_CONFIG
#define SERVEKIT_EXAMPLE_CONFIG "models/pipeline/config.json"
#endif

namespace {

using namespace pipeline_example;
using servekit::in;
using servekit::out;
using servekit::step;

// The composing models. Each batches the step requests of concurrent ensemble requests
// together; classify runs two instances, as the heavier model of a real pipeline would.
using preprocess = servekit::model<preprocess_backend, servekit::dynamic_batcher<>>;
using classify =
    servekit::model<classify_backend, servekit::dynamic_batcher<>, servekit::instance_group<2>>;
using segment = servekit::model<segment_backend, servekit::dynamic_batcher<>>;

// The pipeline as a type. `in<"MODEL_TENSOR", "tensor">` / `out<...>` are Triton's input_map and
// output_map; "preprocessed_image" is an intermediate tensor, never seen by clients. A typo in a
// name, a dtype or dims mismatch, or a cycle is a compile error naming the step and the tensor.
using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"CLASSIFICATION", "SEGMENTATION">,
    step<preprocess, in<"RAW_IMAGE", "IMAGE">, out<"PREPROCESSED_OUTPUT", "preprocessed_image">>,
    step<classify, in<"FORMATTED_IMAGE", "preprocessed_image">,
         out<"CLASSIFICATION_OUTPUT", "CLASSIFICATION">>,
    step<segment, in<"FORMATTED_IMAGE", "preprocessed_image">,
         out<"SEGMENTATION_OUTPUT", "SEGMENTATION">>>;

constexpr int images = 16;

servekit::model_options batching(const char* name) {
  servekit::model_options o;
  o.name = name; // how the runtime ensemble's config finds the model in the registry
  servekit::dynamic_batching_options d;
  d.max_queue_delay_microseconds = 200; // wait briefly for company: bigger batches
  o.dynamic_batching = d;
  return o;
}

/// Image `n`: a brightness ramp, shifted by n so that every image (and answer) differs.
servekit::request make_image(int n) {
  std::vector<std::uint8_t> values(pixels);
  for (std::size_t k = 0; k < values.size(); ++k) {
    values[k] = static_cast<std::uint8_t>((static_cast<int>(k) * 17 + n * 10) % 256);
  }
  servekit::request r;
  r.id = fmt::format("image-{}", n);
  // [1, 16]: the leading 1 is the batch dimension (the pipeline's max_batch_size is 8).
  r.inputs.push_back(servekit::make_tensor("IMAGE", servekit::data_type::uint8, {1, pixels},
                                           std::span<const std::uint8_t>{values}));
  return r;
}

void print_tensor(const servekit::tensor& t) {
  const auto head = fmt::format("  {:<15}{:<6}{:<7}", t.name, servekit::to_string(t.type),
                                servekit::to_string(t.shape));
  if (t.type == servekit::data_type::fp32) {
    fmt::print("{}{:.2f}\n", head, fmt::join(t.values<float>(), " "));
  } else {
    fmt::print("{}{}\n", head, fmt::join(t.values<std::uint8_t>(), " "));
  }
}

/// Same status, same outputs in the same order: names, types, shapes and bytes.
bool identical(const servekit::response& a, const servekit::response& b) {
  if (!a.ok() || !b.ok() || a.outputs.size() != b.outputs.size()) {
    return false;
  }
  return std::ranges::equal(a.outputs, b.outputs, [](const auto& x, const auto& y) {
    return x.name == y.name && x.type == y.type && x.shape == y.shape &&
           x.data.size() == y.data.size() &&
           std::memcmp(x.data.data(), y.data.data(), x.data.size()) == 0;
  });
}

double average_us(servekit::duration_stat d) {
  return d.count == 0 ? 0.0 : static_cast<double>(d.ns) / static_cast<double>(d.count) / 1000.0;
}

/// Per step, as Triton reports an ensemble's composing models. Only the step requests this
/// ensemble sent are counted: the models' own statistics also count their direct clients.
void print_steps(const servekit::ensemble_statistics& s) {
  fmt::print("  {:<5}{:<12}{:>8}{:>14}{:>16}\n", "step", "model", "success", "queue usec",
             "compute usec");
  for (const auto& st : s.steps) {
    const double compute =
        average_us(st.compute_input) + average_us(st.compute_infer) + average_us(st.compute_output);
    fmt::print("  {:<5}{:<12}{:>8}{:>14.1f}{:>16.1f}\n", st.step, st.model_name, st.success.count,
               average_us(st.queue), compute);
  }
}

/// Sends every image at once (so the models can batch them) and waits for all the answers.
template <class Ensemble>
std::vector<servekit::response> infer_all(Ensemble& e) {
  std::vector<std::future<servekit::response>> futures;
  for (int n = 0; n < images; ++n) {
    futures.push_back(e.infer(make_image(n)));
  }
  std::vector<servekit::response> responses;
  for (auto& f : futures) {
    responses.push_back(f.get());
  }
  return responses;
}

bool all_ok(const std::vector<servekit::response>& responses) {
  bool ok = true;
  for (const auto& r : responses) {
    if (!r.ok()) {
      std::fprintf(stderr, "%s failed: %s\n", r.id.c_str(), r.status.message().c_str());
      ok = false;
    }
  }
  return ok;
}

/// A model the repository serves, with the `infer` infer_all calls (a model_ref only submits).
struct served_model {
  servekit::model_ref model;

  std::future<servekit::response> infer(servekit::request&& r) const {
    auto promise = std::make_shared<std::promise<servekit::response>>();
    auto future = promise->get_future();
    const std::string id = r.id;
    const auto accepted = model.submit(std::move(r), [promise](servekit::response&& out) {
      if (out.final) {
        promise->set_value(std::move(out));
      }
    });
    if (!accepted.ok()) {
      promise->set_value(servekit::response::failure(accepted, id));
    }
    return future;
  }
};

/// The compile-time pipeline as the repository hosts it: with the composing models it refers
/// to, declared first (destroyed last, after the ensemble has drained).
struct served_pipeline {
  preprocess pre{batching("compiled.preprocess")};
  classify cls{batching("compiled.classify")};
  segment seg{batching("compiled.segment")};
  pipeline ensemble{{.name = "compiled_pipeline"}, pre, cls, seg};
};

/// KServe's JSON infer request for image `n`, as a client sends it.
std::string infer_body(int n) {
  const auto image = make_image(n);
  const auto values = image.inputs[0].values<std::uint8_t>();
  return nlohmann::json{{"inputs",
                         {{{"name", "IMAGE"},
                           {"shape", {1, pixels}},
                           {"datatype", "UINT8"},
                           {"data", std::vector<int>(values.begin(), values.end())}}}}}
      .dump();
}

/// POSTs `body` to `target` on the loopback port; returns the status and the body.
std::pair<unsigned, std::string> post(std::uint16_t port, const std::string& target,
                                      std::string body) {
  namespace http = boost::beast::http;
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket{io};
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::content_type, "application/json");
  req.body() = std::move(body);
  req.prepare_payload();
  http::write(socket, req);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  return {res.result_int(), res.body()};
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream file{path};
  if (!file) {
    throw std::runtime_error("cannot read " + path.string());
  }
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

} // namespace

int main(int argc, char** argv) {
  std::filesystem::path config_path = SERVEKIT_EXAMPLE_CONFIG;
  bool serve = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--serve") == 0) {
      serve = true;
    } else {
      config_path = argv[i];
    }
  }
  try {
    // Declared before the ensembles: an ensemble holds references to its models.
    preprocess pre{batching("preprocess")};
    classify cls{batching("classify")};
    segment seg{batching("segment")};
    bool ok = true;

    // -- 1. The compile-time ensemble ---------------------------------------------------------
    pipeline p{{.name = "pipeline"}, pre, cls, seg}; // the models in step order
    const auto compiled = infer_all(p);
    ok = all_ok(compiled) && ok;

    fmt::print("compile-time ensemble '{}': {} requests, {} ok\n", p.name(), images,
               std::ranges::count_if(compiled, [](const auto& r) { return r.ok(); }));
    if (compiled[0].ok()) {
      fmt::print("{}:\n", compiled[0].id);
      print_tensor(make_image(0).inputs[0]);
      for (const auto& t : compiled[0].outputs) {
        print_tensor(t);
      }
    }
    print_steps(p.statistics());
    // The step requests of concurrent ensemble requests meet in each model's queue and batch.
    for (const auto& [name, s] :
         {std::pair{"preprocess", pre.statistics()}, std::pair{"classify", cls.statistics()},
          std::pair{"segment", seg.statistics()}}) {
      fmt::print("  {:<12}{} requests in {} executions\n", name, s.inference_count,
                 s.execution_count);
    }

    // -- Pruning: a step whose outputs nobody asked for does not run ----------------------------
    const auto segmented_before = seg.statistics().execution_count;
    auto only_class = make_image(0);
    only_class.requested_outputs = {"CLASSIFICATION"};
    const auto pruned = p.infer(std::move(only_class)).get();
    const auto segmented_after = seg.statistics().execution_count;
    fmt::print("requested_outputs = {{CLASSIFICATION}}: segment executions {} -> {}\n",
               segmented_before, segmented_after);
    if (!pruned.ok() || pruned.find_output("CLASSIFICATION") == nullptr ||
        pruned.find_output("SEGMENTATION") != nullptr || segmented_after != segmented_before) {
      std::fprintf(stderr, "pruning: segment ran, or the response is wrong\n");
      ok = false;
    }

    // -- 2. The same pipeline from Triton's configuration ----------------------------------------
    // The config names its models; the registry maps names (and versions) to the models.
    servekit::model_registry registry;
    registry.add(pre);
    registry.add(cls);
    registry.add(seg);
    servekit::runtime_ensemble configured{servekit::load_model_config(read_file(config_path)),
                                          registry};
    const auto loaded = infer_all(configured);
    ok = all_ok(loaded) && ok;

    int same = 0;
    for (int n = 0; n < images; ++n) {
      const auto i = static_cast<std::size_t>(n);
      if (identical(compiled[i], loaded[i])) {
        ++same;
      } else {
        std::fprintf(stderr, "image-%d: the two forms disagree\n", n);
        ok = false;
      }
    }
    fmt::print("configured ensemble '{}' from {}: {}/{} responses identical to the "
               "compile-time form\n",
               configured.name(), config_path.filename().string(), same, images);
    print_steps(configured.statistics());

    // Both would drain on destruction; saying so makes the order plain.
    configured.shutdown(servekit::shutdown_mode::drain);
    p.shutdown(servekit::shutdown_mode::drain);

    // -- 3. Served: a model repository hosts what the program constructs ------------------------
    // models/ holds the JSON pipeline's folder. The program registers the three models by name
    // (the folder's ensemble finds its steps among them) and the compile-time pipeline, which
    // owns models of its own. Each factory runs again when the model is loaded again.
    servekit::model_repository repo{config_path.parent_path().parent_path()};
    for (const char* name : {"preprocess", "classify", "segment"}) {
      const auto added = repo.add(name, 1, [name]() -> servekit::any_model {
        const std::string_view n = name;
        if (n == "preprocess") {
          return servekit::any_model::make<preprocess>(batching(name));
        }
        if (n == "classify") {
          return servekit::any_model::make<classify>(batching(name));
        }
        return servekit::any_model::make<segment>(batching(name));
      });
      ok = added.ok() && ok;
    }
    const auto added = repo.add("compiled_pipeline", 1, [] {
      return servekit::any_model::make_owning<&served_pipeline::ensemble>();
    });
    if (!added.ok()) {
      std::fprintf(stderr, "%s\n", added.message().c_str());
      ok = false;
    }
    fmt::print("repository {}:\n", repo.root().string());
    for (const auto& row : repo.load_all()) {
      fmt::print("  {:<18} version {}  {}{}\n", row.name, row.version,
                 servekit::to_string(row.state), row.reason.empty() ? "" : ": " + row.reason);
    }
    ok = repo.all_ready() && ok;

    // In process, through the repository: the same answers as the compile-time form's.
    for (const char* name : {"compiled_pipeline", "pipeline"}) {
      const auto m = repo.find(name);
      if (!m) {
        std::fprintf(stderr, "the repository does not serve '%s'\n", name);
        ok = false;
        continue;
      }
      served_model hosted{m->model()};
      const auto answers = infer_all(hosted);
      int agree = 0;
      for (std::size_t i = 0; i < answers.size(); ++i) {
        agree += identical(compiled[i], answers[i]) ? 1 : 0;
      }
      fmt::print("served '{}' in process: {}/{} responses identical\n", name, agree, images);
      ok = agree == images && ok;
    }

    // Over HTTP, as Triton's clients reach it: KServe v2 on a loopback port.
    servekit::http::server_options http_options;
    http_options.host = "127.0.0.1";
    http_options.port = serve ? 8000 : 0; // 0: any free port
    servekit::http::server server{repo, http_options};
    if (serve) {
      server.stop_on_signals(); // Ctrl-C: stop accepting, answer what is in flight, return
    }
    std::thread serving{[&server] { server.run(); }};
    const auto [code, body] =
        post(server.port(), "/v2/models/compiled_pipeline/infer", infer_body(0));
    const auto expected = compiled[0].find_output("CLASSIFICATION")->values<float>();
    bool answered = code == 200;
    if (answered) {
      const auto reply = nlohmann::json::parse(body);
      for (const auto& o : reply.at("outputs")) {
        if (o.at("name") == "CLASSIFICATION") {
          const auto got = o.at("data").get<std::vector<float>>();
          answered = std::ranges::equal(got, expected);
        }
      }
    }
    fmt::print("POST /v2/models/compiled_pipeline/infer: HTTP {}, CLASSIFICATION {}\n", code,
               answered ? "as in process" : "DIFFERS");
    ok = answered && ok;
    if (serve && ok) {
      fmt::print("serving on http://127.0.0.1:{} until Ctrl-C, e.g.\n"
                 "  curl localhost:{}/v2/models/compiled_pipeline\n"
                 "  curl -d '{}' localhost:{}/v2/models/compiled_pipeline/infer\n",
                 server.port(), server.port(), infer_body(0), server.port());
      std::fflush(stdout);
    } else {
      server.stop();
    }
    serving.join();

    fmt::print("{}\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  } catch (const std::exception& e) { // servekit::config_error for a bad config
    std::fprintf(stderr, "pipeline: %s\n", e.what());
    return 1;
  }
}
