#pragma once
/// \file
/// request: what a client asks a model to compute, with Triton's scheduling fields.

#include <servekit/core/assert.hpp>
#include <servekit/core/cancellation.hpp>
#include <servekit/core/clock.hpp>
#include <servekit/core/parameters.hpp>
#include <servekit/core/tensor.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace servekit {

/// A sequence's correlation id: none, an unsigned integer or a string (Triton accepts both;
/// 0 and "" mean "not in a sequence").
class correlation_id {
public:
  correlation_id() noexcept = default;
  correlation_id(std::uint64_t id) noexcept : value_{id} {}   // NOLINT: implicit by design
  correlation_id(std::string id) : value_{std::move(id)} {}   // NOLINT: implicit by design
  correlation_id(const char* id) : value_{std::string{id}} {} // NOLINT: implicit by design

  /// True for "no sequence": unset, 0 or "".
  [[nodiscard]] bool empty() const noexcept {
    if (const auto* n = std::get_if<std::uint64_t>(&value_)) {
      return *n == 0;
    }
    if (const auto* s = std::get_if<std::string>(&value_)) {
      return s->empty();
    }
    return true;
  }
  [[nodiscard]] bool is_string() const noexcept {
    return std::holds_alternative<std::string>(value_);
  }
  [[nodiscard]] std::uint64_t as_uint() const noexcept {
    const auto* n = std::get_if<std::uint64_t>(&value_);
    return n != nullptr ? *n : 0;
  }
  [[nodiscard]] std::string_view as_string() const noexcept {
    const auto* s = std::get_if<std::string>(&value_);
    return s != nullptr ? std::string_view{*s} : std::string_view{};
  }
  [[nodiscard]] std::string to_string() const {
    return is_string() ? std::string{as_string()} : std::to_string(as_uint());
  }
  friend bool operator==(const correlation_id&, const correlation_id&) = default;

private:
  std::variant<std::monostate, std::uint64_t, std::string> value_;
};

/// One inference request. Build it, then hand it to a model's `submit` or `infer`; the model
/// owns it until the final response. Field names follow Triton's request (and the KServe v2
/// request parameters `priority`, `timeout`, `sequence_id`, `sequence_start`, `sequence_end`,
/// which are fields here; every other request parameter is in `parameters`).
struct request {
  std::string id;                             ///< echoed on the response
  tensor_list inputs;                         ///< with the batch dim when the model batches
  std::vector<std::string> requested_outputs; ///< empty: every output
  std::uint64_t priority = 0;   ///< 1 is highest; 0 (or > levels) means the default level
  std::uint64_t timeout_us = 0; ///< queue timeout; 0 means the queue policy's default
  correlation_id sequence_id;   ///< for sequence batching
  bool sequence_start = false;
  bool sequence_end = false;
  cancellation_token cancellation;
  time_point arrival{}; ///< stamped by the model at submit
  /// The client's other parameters (Triton's custom request parameters, e.g. `max_tokens`),
  /// for the backend: the scheduling ones above are fields, not entries here.
  parameter_list parameters;

  [[nodiscard]] const tensor* find_input(std::string_view name) const noexcept {
    for (const auto& t : inputs) {
      if (t.name == name) {
        return &t;
      }
    }
    return nullptr;
  }
  [[nodiscard]] tensor* find_input(std::string_view name) noexcept {
    for (auto& t : inputs) {
      if (t.name == name) {
        return &t;
      }
    }
    return nullptr;
  }
  /// Input `name`, which the request must hold. In a backend's execute this is guaranteed for
  /// every input the model declares without `optional`: the model's validator refused requests
  /// that lack one before they were queued. For an optional or undeclared input use find_input.
  [[nodiscard]] const tensor& input(std::string_view name) const noexcept {
    const tensor* t = find_input(name);
    SERVEKIT_ASSERT(t != nullptr, "request::input(name): the request has no input of that name; "
                                  "use find_input for an optional input");
    return *t;
  }
  [[nodiscard]] tensor& input(std::string_view name) noexcept {
    tensor* t = find_input(name);
    SERVEKIT_ASSERT(t != nullptr, "request::input(name): the request has no input of that name; "
                                  "use find_input for an optional input");
    return *t;
  }
  /// True when the client asked for `name` (or asked for nothing, meaning everything).
  [[nodiscard]] bool wants_output(std::string_view name) const noexcept {
    if (requested_outputs.empty()) {
      return true;
    }
    for (const auto& o : requested_outputs) {
      if (o == name) {
        return true;
      }
    }
    return false;
  }
};

} // namespace servekit
