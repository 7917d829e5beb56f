#pragma once
// Small backends the ensemble tests compose: each reads one FP32 [4] input and writes one FP32
// [4] output computed from it, so a response tells which steps ran in which order.

#include <servekit/backend/backend.hpp>
#include <servekit/core/fixed_string.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/tensor.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

namespace ensemble_tests {

using servekit::data_type;
using servekit::shape;

/// out = f(in), element-wise, named by the template arguments. Each instantiation has its own
/// hooks, which a test sets before submitting and resets after (see `reset`).
template <class Op, servekit::fixed_string In, servekit::fixed_string Out,
          std::int32_t MaxBatch = 8>
struct unary_backend {
  static constexpr std::int32_t max_batch_size = MaxBatch;
  static constexpr servekit::tensor_declaration inputs[] = {{In.view(), data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{Out.view(), data_type::fp32, {4}}};

  static inline std::function<void(servekit::batch&)> before; // NOLINT: test-only
  static inline std::function<void(servekit::batch&)> after;  // NOLINT: test-only
  static inline std::atomic<bool> omit_output{false};         // NOLINT: test-only

  static void reset() {
    before = nullptr;
    after = nullptr;
    omit_output = false;
  }

  explicit unary_backend(const servekit::instance_context&) {}

  void execute(servekit::batch& b) {
    if (before) {
      before(b);
    }
    if (omit_output) {
      return;
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::tensor& in = *b.request(i).find_input(In.view());
      auto& out = b.response(i).add_output(std::string{Out.view()}, data_type::fp32, in.shape);
      std::transform(in.values<float>().begin(), in.values<float>().end(),
                     out.values<float>().begin(), Op{});
    }
    if (after) {
      after(b);
    }
  }
};

struct plus_one {
  float operator()(float x) const { return x + 1.0F; }
};
struct times_two {
  float operator()(float x) const { return x * 2.0F; }
};
struct times_three {
  float operator()(float x) const { return x * 3.0F; }
};

/// A request of one FP32 [batch, 4] input filled with `value`.
inline servekit::request make_request(const char* input, float value, std::int64_t batch = 1,
                                      std::string id = "r") {
  servekit::request r;
  r.id = std::move(id);
  auto t = servekit::make_tensor(input, data_type::fp32, shape{batch, 4});
  std::fill(t.values<float>().begin(), t.values<float>().end(), value);
  r.inputs.push_back(std::move(t));
  return r;
}

inline float first_value(const servekit::response& r, const char* output) {
  const auto* t = r.find_output(output);
  if (t == nullptr) {
    throw std::runtime_error(std::string{"no output "} + output);
  }
  return t->values<float>()[0];
}

} // namespace ensemble_tests
