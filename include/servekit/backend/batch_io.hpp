#pragma once
/// \file
/// Gather and scatter between the requests of a batch and one contiguous host buffer.
///
/// Each comes in two forms: `gather_input`/`scatter_output` return a status, for a backend that
/// handles the failure itself; `gather_input_or_throw`/`scatter_output_or_throw` throw
/// batch_io_error, for a backend that lets the shell fail the batch (see batch_io_error).

#include <servekit/backend/batch.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/status.hpp>

#include <cstddef>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace servekit {

/// What the `_or_throw` forms throw. A backend's execute need not catch it: the shell catches
/// every exception execute lets out and answers each request of that batch with an `internal`
/// error carrying the message, and the instance goes on serving.
class batch_io_error : public std::runtime_error {
public:
  explicit batch_io_error(servekit::status s)
      : std::runtime_error{s.message()}, status_{std::move(s)} {}
  /// The status the status-returning form would have returned.
  [[nodiscard]] const servekit::status& status() const noexcept { return status_; }

private:
  servekit::status status_;
};

/// Total bytes of input `name` over the whole batch (0 if a request lacks it).
[[nodiscard]] inline std::size_t gathered_size(const batch& b, std::string_view name) noexcept {
  std::size_t total = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (const tensor* t = b.request(i).find_input(name)) {
      total += t->data.size();
    }
  }
  return total;
}

/// Copies input `name` of every request, in batch order, into `dst` (host memory), which must
/// hold exactly gathered_size(b, name) bytes.
[[nodiscard]] inline status gather_input(const batch& b, std::string_view name,
                                         std::span<std::byte> dst) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const tensor* t = b.request(i).find_input(name);
    if (t == nullptr) {
      return invalid_argument("gather_input: request " + std::to_string(i) + " has no input '" +
                              std::string{name} + "'");
    }
    if (!t->data.location().host_accessible()) {
      return invalid_argument("gather_input: input '" + std::string{name} +
                              "' is in device memory");
    }
    if (dst.size() - at < t->data.size()) {
      return invalid_argument("gather_input: destination too small for input '" +
                              std::string{name} + "'");
    }
    if (!t->data.empty()) {
      std::memcpy(dst.data() + at, t->data.data(), t->data.size());
    }
    at += t->data.size();
  }
  if (at != dst.size()) {
    return invalid_argument("gather_input: destination larger than input '" + std::string{name} +
                            "' over the batch");
  }
  return {};
}

/// Splits `src` (the batched result, `item` shape per batch element) into one output tensor
/// per request, shaped [request_batch_size, item...] when the model batches, else `item`.
[[nodiscard]] inline status scatter_output(batch& b, std::string_view name, data_type type,
                                           const shape& item, std::span<const std::byte> src) {
  const bool batched = b.instance().max_batch_size > 0;
  const auto item_bytes = static_cast<std::size_t>(item.element_count()) * byte_size(type);
  std::size_t at = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const auto n = static_cast<std::size_t>(b.request_batch_size(i));
    const std::size_t bytes = n * item_bytes;
    if (src.size() - at < bytes) {
      return invalid_argument("scatter_output: source too small for output '" + std::string{name} +
                              "'");
    }
    const shape s = batched ? item.with_batch(static_cast<std::int64_t>(n)) : item;
    tensor& out = b.response(i).add_output(std::string{name}, type, s);
    if (bytes != 0) {
      std::memcpy(out.data.data(), src.data() + at, bytes);
    }
    at += bytes;
  }
  return {};
}

/// gather_input, throwing batch_io_error where it would return an error: for an execute that
/// lets the shell fail the batch, with no status to check.
inline void gather_input_or_throw(const batch& b, std::string_view name, std::span<std::byte> dst) {
  if (status s = gather_input(b, name, dst); !s.ok()) {
    throw batch_io_error{std::move(s)};
  }
}

/// scatter_output, throwing batch_io_error where it would return an error (the outputs it
/// added before the failure stay; the shell's error response replaces them).
inline void scatter_output_or_throw(batch& b, std::string_view name, data_type type,
                                    const shape& item, std::span<const std::byte> src) {
  if (status s = scatter_output(b, name, type, item, src); !s.ok()) {
    throw batch_io_error{std::move(s)};
  }
}

} // namespace servekit
