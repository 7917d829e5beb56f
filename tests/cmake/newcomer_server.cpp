// What a newcomer writes in their first hour, built against an installed servekit (the consumer
// project beside this file, with -DSERVEKIT_CONSUMER_NEWCOMER=ON): a stateless backend, a
// stateful one (a running sum over a sequence, in servekit's implicit state), a compile-time
// ensemble of two models, all served through one model repository over KServe v2 HTTP.
// newcomer_curl.sh starts it and drives it with curl.
//
//   newcomer_server <empty folder>   writes the repository there, prints "HTTP listening on
//                                    HOST:PORT" and serves until SIGINT/SIGTERM
#include <servekit/http.hpp>
#include <servekit/repository.hpp>
#include <servekit/servekit.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

using servekit::data_type;

/// OUTPUT = INPUT * Factor, FP32, any length; batches up to 8 requests.
template <int Factor, int Offset>
struct affine_backend {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT", data_type::fp32, {-1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT", data_type::fp32, {-1}}};

  explicit affine_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::tensor& in = *b.request(i).find_input("INPUT"); // validated: present
      auto out = b.response(i).add_output("OUTPUT", data_type::fp32, in.shape).values<float>();
      const auto x = in.values<float>();
      for (std::size_t k = 0; k < x.size(); ++k) {
        out[k] = x[k] * Factor + Offset;
      }
    }
  }
};
using scale_backend = affine_backend<2, 0>;  // y = 2x
using offset_backend = affine_backend<1, 1>; // y = x + 1

/// OUTPUT = the running sum of INPUT over a sequence. The sum lives in implicit state
/// (INPUT_STATE in, OUTPUT_STATE out, declared in the config), so the backend keeps nothing.
struct running_sum_backend {
  static constexpr servekit::tensor_declaration inputs[] = {{"INPUT", data_type::int32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUTPUT", data_type::int32, {1}}};

  explicit running_sum_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      if (!b.sequence(i).ready) {
        continue; // a padding slot of the direct strategy
      }
      const servekit::request& r = b.request(i);
      const servekit::tensor& in = *r.find_input("INPUT");
      const servekit::tensor& state = *r.find_input("INPUT_STATE");
      const std::int32_t previous = b.sequence(i).start ? 0 : state.values<std::int32_t>()[0];
      const std::int32_t sum = previous + in.values<std::int32_t>()[0];
      servekit::response& out = b.response(i);
      out.add_output("OUTPUT", data_type::int32, in.shape).values<std::int32_t>()[0] = sum;
      out.add_output("OUTPUT_STATE", data_type::int32, state.shape).values<std::int32_t>()[0] = sum;
    }
  }
};

// The compile-time ensemble: X -> scale -> offset -> Y, that is Y = 2X + 1.
using scale_model = servekit::model<scale_backend, servekit::dynamic_batcher<>>;
using offset_model = servekit::model<offset_backend, servekit::dynamic_batcher<>>;
using scale_then_offset = servekit::ensemble<
    servekit::inputs<"X">, servekit::outputs<"Y">,
    servekit::step<scale_model, servekit::in<"INPUT", "X">, servekit::out<"OUTPUT", "doubled">>,
    servekit::step<offset_model, servekit::in<"INPUT", "doubled">, servekit::out<"OUTPUT", "Y">>>;

/// What the repository serves for it: the composing models first, the ensemble last.
struct served_ensemble {
  scale_model scale{{.name = "scale_then_offset.scale"}};
  offset_model offset{{.name = "scale_then_offset.offset"}};
  scale_then_offset ensemble{{.name = "scale_then_offset"}, scale, offset};
};

using backends =
    servekit::backend_list<servekit::named_backend<"scale", scale_backend>,
                           servekit::named_backend<"running_sum", running_sum_backend>>;

void write(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream{file} << text;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fputs("usage: newcomer_server <empty folder for the model repository>\n", stderr);
    return 2;
  }
  const std::filesystem::path root = argv[1];
  // Tensors and max_batch_size left to the backend's declarations (Triton's auto-complete).
  write(root / "scale" / "config.json",
        R"({"name": "scale", "backend": "scale", "dynamic_batching": {}})");
  write(root / "running_sum" / "config.json", R"({
    "name": "running_sum", "backend": "running_sum", "max_batch_size": 4,
    "sequence_batching": {
      "max_sequence_idle_microseconds": 5000000,
      "state": [{"input_name": "INPUT_STATE", "output_name": "OUTPUT_STATE",
                 "data_type": "TYPE_INT32", "dims": [1]}]
    }
  })");

  servekit::model_repository models{root, backends{}};
  const auto added = models.add("scale_then_offset", 1, [] {
    return servekit::any_model::make_owning<&served_ensemble::ensemble>();
  });
  if (!added.ok()) {
    std::fprintf(stderr, "newcomer_server: %s\n", added.message().c_str());
    return 1;
  }
  for (const auto& row : models.load_all()) {
    std::printf("model '%s' version %lld: %s %s\n", row.name.c_str(),
                static_cast<long long>(row.version), std::string{to_string(row.state)}.c_str(),
                row.reason.c_str());
  }
  servekit::http::server server{models, {.host = "127.0.0.1", .port = 0}};
  server.stop_on_signals();
  std::printf("HTTP listening on 127.0.0.1:%u\n", static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  server.run();
  // Answer what is in flight, within 5 s.
  return servekit::shutdown_models(models, servekit::shutdown_mode::drain, std::chrono::seconds{5})
             ? 0
             : 1;
}
