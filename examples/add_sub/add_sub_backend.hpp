#pragma once
/// \file
/// add_sub_backend: Triton's "simple" model as a servekit backend (examples/add_sub/main.cpp
/// serves it; docs/getting-started.md builds it step by step, and its doc test uses this one).
///
/// INPUT0, INPUT1: FP32 [16]  ->  OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1.
///
/// The example server bundles the same backend with its declarations left to each model's config
/// (examples/server/backends/add_sub.hpp: basic_add_sub_backend<-1, 0>).

#include <servekit/backend.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

// A backend is an ordinary class: a constructor taking an instance_context, and execute().
// `Length` is the length of every tensor (-1: any, as the config says) and `MaxBatchSize` the
// largest batch (0: as the config says); add_sub_backend below is Triton's, [16] and 8.
template <std::int64_t Length, std::int32_t MaxBatchSize>
struct basic_add_sub_backend {
  // Optional declarations: servekit validates requests against them before queueing.
  static constexpr std::int32_t max_batch_size = MaxBatchSize;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT0", servekit::data_type::fp32, {Length}},
      {"INPUT1", servekit::data_type::fp32, {Length}},
  };
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUTPUT0", servekit::data_type::fp32, {Length}},
      {"OUTPUT1", servekit::data_type::fp32, {Length}},
  };

  explicit basic_add_sub_backend(const servekit::instance_context&) {}

  // One call per batch: fill one response per request.
  void execute(servekit::batch& batch) {
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto& request = batch.request(i);
      // Declared inputs: the model's validator refused requests without them, so input()
      // returns a reference (find_input, a pointer, is for optional inputs).
      const auto& a = request.input("INPUT0"); // [batch, 16]
      const auto& b = request.input("INPUT1");
      auto& response = batch.response(i);
      // Each input on its own matches its declaration; with variable dims ([-1]) only the
      // backend knows that they must also match each other. The error fails this request only.
      if (a.shape != b.shape) {
        response.status = servekit::invalid_argument(
            "model '" + std::string{batch.instance().model_name} +
            "': INPUT0 and INPUT1 must have the same shape, got " + servekit::to_string(a.shape) +
            " and " + servekit::to_string(b.shape));
        continue;
      }
      const auto x = a.values<float>();
      const auto y = b.values<float>();
      // Only what the client asked for: the model would drop the other output anyway.
      if (request.wants_output("OUTPUT0")) {
        auto sum =
            response.add_output("OUTPUT0", servekit::data_type::fp32, a.shape).values<float>();
        for (std::size_t k = 0; k < x.size(); ++k) {
          sum[k] = x[k] + y[k];
        }
      }
      if (request.wants_output("OUTPUT1")) {
        auto diff =
            response.add_output("OUTPUT1", servekit::data_type::fp32, a.shape).values<float>();
        for (std::size_t k = 0; k < x.size(); ++k) {
          diff[k] = x[k] - y[k];
        }
      }
    }
  }
};

using add_sub_backend = basic_add_sub_backend<16, 8>;
