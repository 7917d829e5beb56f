#pragma once
/// \file
/// response: a status plus output tensors. A request's last response carries `final = true`.

#include <servekit/core/assert.hpp>
#include <servekit/core/parameters.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit {

/// Where a request's time went, as the model that executed it measured it (all zero for a request
/// that never executed). Ensembles add it up per step, as Triton's composing-model statistics do.
struct request_timing {
  std::uint64_t queue_ns = 0;         ///< arrival to execution start
  std::uint64_t compute_input_ns = 0; ///< of the batch it executed in
  std::uint64_t compute_infer_ns = 0;
  std::uint64_t compute_output_ns = 0;
  friend bool operator==(const request_timing&, const request_timing&) = default;
};

struct response {
  servekit::status status; ///< ok, or why the request failed (then `outputs` is empty)
  std::string id;          ///< the request's id
  tensor_list outputs;
  bool final = true; ///< false only on the partial responses of decoupled models
  request_timing timing;
  /// Set by the backend for the client (Triton's response parameters): the KServe v2 response's
  /// "parameters" object.
  parameter_list parameters;

  [[nodiscard]] bool ok() const noexcept { return status.ok(); }

  [[nodiscard]] const tensor* find_output(std::string_view name) const noexcept {
    for (const auto& t : outputs) {
      if (t.name == name) {
        return &t;
      }
    }
    return nullptr;
  }
  /// Output `name`, which the response must hold (for a client reading an ok response of a
  /// model that always produces it; find_output when it may be missing or was not requested).
  [[nodiscard]] const tensor& output(std::string_view name) const noexcept {
    const tensor* t = find_output(name);
    SERVEKIT_ASSERT(t != nullptr, "response::output(name): the response has no output of that "
                                  "name; use find_output when it may be missing");
    return *t;
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
