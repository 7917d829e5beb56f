#pragma once
// Prelude of docs/getting-started.md's blocks after "The backend": add_sub_backend as that section
// builds it (its blocks "backend", "declarations" and "execute", put together).
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <utility>

struct add_sub_backend {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_spec inputs[] = {
      {"INPUT0", servekit::data_type::fp32, {16}},
      {"INPUT1", servekit::data_type::fp32, {16}},
  };

  explicit add_sub_backend(const servekit::instance_context&) {}

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
