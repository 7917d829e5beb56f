#pragma once
/// \file
/// request_builder: a request in one expression, its inputs typed by their values.
///
///     servekit::request r = servekit::request_builder{"req-1"}
///                               .input("INPUT0", {1, 16}, values)         // FP32 from floats
///                               .input("TEXT", {1, 2}, {"hello", "world"}) // BYTES from strings
///                               .output("OUTPUT0")
///                               .sequence(42, {.start = true})
///                               .priority(1)
///                               .parameter("max_tokens", 64)              // for the backend
///                               .parameter("stop", "\n")
///                               .build();

#include <servekit/core/cancellation.hpp>
#include <servekit/core/parameters.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/tensor.hpp>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <ranges>
#include <string>
#include <string_view>
#include <utility>

namespace servekit {

/// Where a request stands in its sequence (Triton's sequence_start and sequence_end flags).
struct sequence_flags {
  bool start = false; ///< the sequence's first request
  bool end = false;   ///< the sequence's last request
};

/// Builds a servekit::request. Each member sets one field and returns the builder; build()
/// hands the request over (and leaves the builder empty). The inputs take their data type from
/// their values (make_tensor's overloads, core/tensor.hpp): floats give FP32, `std::int32_t`
/// INT32, strings BYTES.
class request_builder {
public:
  request_builder() = default;
  /// A request whose responses carry `id`.
  explicit request_builder(std::string id) { request_.id = std::move(id); }

  /// An input holding a copy of `values` (a vector, array or span of numbers, or a range of
  /// strings for BYTES), shaped `s` (with the batch dimension when the model batches).
  template <std::ranges::input_range R>
  request_builder& input(std::string name, const shape& s, const R& values) {
    request_.inputs.push_back(make_tensor(std::move(name), s, values));
    return *this;
  }
  /// The same from a braced list of numbers: `.input("X", {1, 2}, {1.0F, 2.0F})`.
  template <element_type T>
  request_builder& input(std::string name, const shape& s, std::initializer_list<T> values) {
    request_.inputs.push_back(make_tensor(std::move(name), s, values));
    return *this;
  }
  /// A BYTES input from a braced list of strings: `.input("TEXT", {1, 2}, {"a", "b"})`.
  request_builder& input(std::string name, const shape& s,
                         std::initializer_list<std::string_view> strings) {
    request_.inputs.push_back(make_tensor(std::move(name), s, strings));
    return *this;
  }
  /// An input built elsewhere (e.g. of FP16, or with a buffer of its own).
  request_builder& input(tensor t) {
    request_.inputs.push_back(std::move(t));
    return *this;
  }

  /// Asks for output `name`; a request that asks for none gets every output.
  request_builder& output(std::string name) {
    request_.requested_outputs.push_back(std::move(name));
    return *this;
  }

  /// Makes the request part of sequence `id` (an integer or a string, as Triton's
  /// correlation ids), with its place in it: `.sequence(42, {.start = true})`.
  request_builder& sequence(correlation_id id, sequence_flags flags = {}) {
    request_.sequence_id = std::move(id);
    request_.sequence_start = flags.start;
    request_.sequence_end = flags.end;
    return *this;
  }

  /// Triton's priority level: 1 is highest; 0 means the model's default level.
  request_builder& priority(std::uint64_t level) noexcept {
    request_.priority = level;
    return *this;
  }

  /// How long the request may wait in the queue (Triton's request timeout); 0 means the queue
  /// policy's default.
  request_builder& timeout(std::chrono::microseconds t) noexcept {
    request_.timeout_us = static_cast<std::uint64_t>(t.count() < 0 ? 0 : t.count());
    return *this;
  }

  /// A request parameter for the backend (Triton's custom parameters: `max_tokens`,
  /// `temperature`...), read there with `request.parameters.get`: a bool, an integer (stored as
  /// int64), a floating-point number (double) or text (string). Setting a name again replaces
  /// its value. The scheduling parameters are the members above, not parameters.
  template <class T>
    requires requires(parameter_list& l, std::string_view n, T&& v) {
      l.set(n, std::forward<T>(v));
    }
  request_builder& parameter(std::string_view name, T&& value) {
    request_.parameters.set(name, std::forward<T>(value));
    return *this;
  }

  /// Lets the holder of `token`'s source cancel the request.
  request_builder& cancellation(cancellation_token token) noexcept {
    request_.cancellation = std::move(token);
    return *this;
  }

  /// The request, ready for a model's submit or infer.
  [[nodiscard]] request build() { return std::exchange(request_, request{}); }

private:
  request request_;
};

} // namespace servekit
