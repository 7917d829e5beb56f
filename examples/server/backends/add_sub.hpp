#pragma once
/// \file
/// Backend `add_sub`: OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1, elementwise, in
/// FP32 (Triton's add_sub example). The config picks the dims (the bundled model uses [16]) and
/// the scheduling; the two inputs of one request must have the same shape.

#include "execute_delay.hpp"

#include <servekit/backend/backend.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace servekit_server {

class add_sub_backend {
public:
  // Any length: the config chooses it ([16] in the bundled model), the request validator checks
  // it. max_batch_size stays undeclared (0): the config decides whether and how much to batch.
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT0", servekit::data_type::fp32, {-1}},
      {"INPUT1", servekit::data_type::fp32, {-1}},
  };
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUTPUT0", servekit::data_type::fp32, {-1}},
      {"OUTPUT1", servekit::data_type::fp32, {-1}},
  };

  explicit add_sub_backend(const servekit::instance_context& context)
      : delay_{execute_delay(context)} {}

  void execute(servekit::batch& b) {
    simulate_work(delay_);
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::request& r = b.request(i);
      servekit::response& out = b.response(i);
      const servekit::tensor& a = *r.find_input("INPUT0");
      const servekit::tensor& c = *r.find_input("INPUT1");
      // Each input on its own matches the config; with variable dims ([-1]) only the backend
      // knows that they must also match each other.
      if (a.shape != c.shape) {
        out.status = servekit::invalid_argument(
            "model '" + std::string{b.instance().model_name} +
            "': INPUT0 and INPUT1 must have the same shape, got " + servekit::to_string(a.shape) +
            " and " + servekit::to_string(c.shape));
        continue;
      }
      const auto x = a.values<float>();
      const auto y = c.values<float>();
      // Only what the client asked for: the model would drop the other output anyway.
      if (r.wants_output("OUTPUT0")) {
        auto sum = out.add_output("OUTPUT0", servekit::data_type::fp32, a.shape).values<float>();
        for (std::size_t k = 0; k < x.size(); ++k) {
          sum[k] = x[k] + y[k];
        }
      }
      if (r.wants_output("OUTPUT1")) {
        auto diff = out.add_output("OUTPUT1", servekit::data_type::fp32, a.shape).values<float>();
        for (std::size_t k = 0; k < x.size(); ++k) {
          diff[k] = x[k] - y[k];
        }
      }
    }
  }

private:
  std::chrono::milliseconds delay_;
};

} // namespace servekit_server
