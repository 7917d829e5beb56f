#pragma once
/// \file
/// response: a status plus output tensors. A request's last response carries `final = true`.

#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit {

struct response {
  servekit::status status; ///< ok, or why the request failed (then `outputs` is empty)
  std::string id;          ///< the request's id
  tensor_list outputs;
  bool final = true; ///< false only on the partial responses of decoupled models

  [[nodiscard]] bool ok() const noexcept { return status.ok(); }

  [[nodiscard]] const tensor* find_output(std::string_view name) const noexcept {
    for (const auto& t : outputs) {
      if (t.name == name) {
        return &t;
      }
    }
    return nullptr;
  }

  /// Appends an output of fixed-size elements and returns it for filling.
  tensor& add_output(std::string name, data_type type, const shape& s) {
    return outputs.emplace_back(make_tensor(std::move(name), type, s));
  }

  /// A failed response.
  [[nodiscard]] static response failure(servekit::status s, std::string id = {}) {
    response r;
    r.status = std::move(s);
    r.id = std::move(id);
    return r;
  }
};

} // namespace servekit
