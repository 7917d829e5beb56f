#pragma once
/// \file
/// add_sub_backend: Triton's "simple" model as a servekit backend (examples/add_sub/main.cpp
/// serves it; docs/getting-started.md builds it step by step, and its doc test uses this one).
///
/// INPUT0, INPUT1: FP32 [16]  ->  OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1.

#include <servekit/backend.hpp>

#include <cstddef>
#include <cstdint>

// A backend is an ordinary class: a constructor taking an instance_context, and execute().
struct add_sub_backend {
  // Optional declarations: servekit validates requests against them before queueing.
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT0", servekit::data_type::fp32, {16}},
      {"INPUT1", servekit::data_type::fp32, {16}},
  };
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUTPUT0", servekit::data_type::fp32, {16}},
      {"OUTPUT1", servekit::data_type::fp32, {16}},
  };

  explicit add_sub_backend(const servekit::instance_context&) {}

  // One call per batch: fill one response per request.
  void execute(servekit::batch& batch) {
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto& request = batch.request(i);
      const auto a = request.find_input("INPUT0")->values<float>();
      const auto b = request.find_input("INPUT1")->values<float>();
      const auto shape = request.find_input("INPUT0")->shape; // [batch, 16]
      auto& response = batch.response(i);
      auto sum = response.add_output("OUTPUT0", servekit::data_type::fp32, shape).values<float>();
      auto diff = response.add_output("OUTPUT1", servekit::data_type::fp32, shape).values<float>();
      for (std::size_t k = 0; k < a.size(); ++k) {
        sum[k] = a[k] + b[k];
        diff[k] = a[k] - b[k];
      }
    }
  }
};
