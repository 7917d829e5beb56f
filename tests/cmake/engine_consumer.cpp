// A user of servekit::servekit alone, the engine (the consumer projects beside this file build
// it): a backend, a model<> with dynamic batching, one request answered. Fails to compile if the
// engine's headers bring the server tier's dependencies, and exits 1 on a wrong answer.
#include <servekit/servekit.hpp>

#if defined(NLOHMANN_JSON_VERSION_MAJOR) || defined(FMT_VERSION) || defined(BOOST_BEAST_VERSION)
#error "servekit/servekit.hpp (the engine) must not include nlohmann-json, fmt or Boost.Beast"
#endif

#include <array>
#include <cstdint>
#include <cstdio>
#include <span>
#include <utility>

namespace {

struct doubler {
  static constexpr std::int32_t max_batch_size = 4;
  static constexpr servekit::tensor_declaration inputs[] = {{"X", servekit::data_type::fp32, {2}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"Y", servekit::data_type::fp32, {2}}};

  explicit doubler(const servekit::instance_context&) {}

  void execute(servekit::batch& batch) {
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto& x = *batch.request(i).find_input("X");
      auto y =
          batch.response(i).add_output("Y", servekit::data_type::fp32, x.shape).values<float>();
      const auto in = x.values<float>();
      for (std::size_t k = 0; k < in.size(); ++k) {
        y[k] = 2.0F * in[k];
      }
    }
  }
};

} // namespace

int main() {
  servekit::model_options options;
  options.name = "doubler";
  options.dynamic_batching = servekit::dynamic_batching_options{};
  servekit::model<doubler, servekit::dynamic_batcher<>> model{options};

  const std::array<float, 2> x{1.5F, -2.0F};
  servekit::request r;
  r.inputs.push_back(
      servekit::make_tensor("X", servekit::data_type::fp32, {1, 2}, std::span<const float>{x}));
  const servekit::response answer = model.infer(std::move(r)).get();
  const auto* y = answer.find_output("Y");
  if (!answer.ok() || y == nullptr || y->values<float>()[0] != 3.0F ||
      y->values<float>()[1] != -4.0F) {
    std::puts("engine_consumer: wrong answer");
    return 1;
  }
  std::puts("engine_consumer: ok");
  return 0;
}
