#pragma once
/// \file
/// Backend `add_sub_int32`: OUTPUT0 = INPUT0 + INPUT1 and OUTPUT1 = INPUT0 - INPUT1, elementwise,
/// in int32 (wrapping): Triton's example models `simple` and `simple_string`.
///
/// The config picks the tensors' type, all four the same: TYPE_INT32 (`simple`), or TYPE_STRING
/// whose elements are decimal int32 numbers, answered as decimal strings (`simple_string`, whose
/// ONNX graph casts strings to int32 and back). Dims and batching are the config's too; the two
/// inputs of one request must have the same shape. A BYTES element that is not a decimal int32
/// fails its request (400), naming the input and the element.

#include "control_values.hpp"
#include "execute_delay.hpp"

#include <servekit/backend/backend.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/data_type.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace servekit_server {

class add_sub_int32_backend {
public:
  explicit add_sub_int32_backend(const servekit::instance_context& context)
      : delay_{execute_delay(context)} {
    constexpr std::string_view names[] = {"INPUT0", "INPUT1", "OUTPUT0", "OUTPUT1"};
    for (std::size_t k = 0; k < 4; ++k) {
      const auto& list = k < 2 ? context.inputs : context.outputs;
      const servekit::tensor_config* found = nullptr;
      for (const auto& t : list) {
        if (t.name == names[k]) {
          found = &t;
        }
      }
      if (found == nullptr) {
        throw std::invalid_argument("the add_sub_int32 backend needs INPUT0, INPUT1, OUTPUT0 and "
                                    "OUTPUT1 in the config; '" +
                                    std::string{names[k]} + "' is missing");
      }
      if (k == 0) {
        type_ = found->type;
      }
      if (found->type != type_ ||
          (type_ != servekit::data_type::int32 && type_ != servekit::data_type::bytes)) {
        throw std::invalid_argument(
            "the add_sub_int32 backend computes in int32: INPUT0, INPUT1, OUTPUT0 and OUTPUT1 must "
            "all be TYPE_INT32, or all TYPE_STRING holding decimal numbers; '" +
            std::string{names[k]} + "' is " + std::string{servekit::to_config_string(found->type)});
      }
    }
  }

  void execute(servekit::batch& b) {
    simulate_work(delay_);
    for (std::size_t i = 0; i < b.size(); ++i) {
      const servekit::request& r = b.request(i);
      servekit::response& out = b.response(i);
      const servekit::tensor& a = r.input("INPUT0");
      const servekit::tensor& c = r.input("INPUT1");
      if (a.shape != c.shape) {
        out.status = servekit::invalid_argument(
            "model '" + std::string{b.instance().model_name} +
            "': INPUT0 and INPUT1 must have the same shape, got " + servekit::to_string(a.shape) +
            " and " + servekit::to_string(c.shape));
        continue;
      }
      if (type_ == servekit::data_type::int32) {
        add_sub(r, out, a.shape, a.values<std::int32_t>(), c.values<std::int32_t>());
        continue;
      }
      std::vector<std::int32_t> x;
      std::vector<std::int32_t> y;
      if (auto s = parse(b, a, x); !s.ok()) {
        out.status = std::move(s);
        continue;
      }
      if (auto s = parse(b, c, y); !s.ok()) {
        out.status = std::move(s);
        continue;
      }
      add_sub(r, out, a.shape, x, y);
    }
  }

private:
  /// The decimal numbers in BYTES tensor `t`, into `values`.
  static servekit::status parse(const servekit::batch& b, const servekit::tensor& t,
                                std::vector<std::int32_t>& values) {
    const auto elements = servekit::decode_bytes(t.data.bytes());
    if (!elements) {
      return servekit::invalid_argument("model '" + std::string{b.instance().model_name} +
                                        "': input '" + t.name + "' is not well-formed BYTES");
    }
    values.reserve(elements->size());
    for (std::size_t k = 0; k < elements->size(); ++k) {
      const auto v = parse_decimal<std::int32_t>((*elements)[k]);
      if (!v) {
        return servekit::invalid_argument("model '" + std::string{b.instance().model_name} +
                                          "': element " + std::to_string(k) + " of input '" +
                                          t.name + "' is \"" + std::string{(*elements)[k]} +
                                          "\", not a decimal int32 number");
      }
      values.push_back(*v);
    }
    return {};
  }

  /// Writes the requested outputs, in the model's type.
  void add_sub(const servekit::request& r, servekit::response& out, const servekit::shape& s,
               std::span<const std::int32_t> x, std::span<const std::int32_t> y) const {
    if (r.wants_output("OUTPUT0")) {
      write(out, "OUTPUT0", s, x, y, wrapping_add);
    }
    if (r.wants_output("OUTPUT1")) {
      write(out, "OUTPUT1", s, x, y, wrapping_sub);
    }
  }

  template <class Op>
  void write(servekit::response& out, std::string name, const servekit::shape& s,
             std::span<const std::int32_t> x, std::span<const std::int32_t> y, Op op) const {
    if (type_ == servekit::data_type::int32) {
      auto values = out.add_output(std::move(name), type_, s).values<std::int32_t>();
      for (std::size_t k = 0; k < x.size(); ++k) {
        values[k] = op(x[k], y[k]);
      }
      return;
    }
    std::vector<std::string> text;
    text.reserve(x.size());
    for (std::size_t k = 0; k < x.size(); ++k) {
      text.push_back(std::to_string(op(x[k], y[k])));
    }
    const std::vector<std::string_view> views{text.begin(), text.end()};
    out.outputs.push_back(
        servekit::tensor{std::move(name), type_, s, servekit::encode_bytes(views)});
  }

  std::chrono::milliseconds delay_;
  servekit::data_type type_ = servekit::data_type::invalid;
};

} // namespace servekit_server
