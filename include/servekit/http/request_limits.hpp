#pragma once
/// \file
/// request_limits: how much work one request body may ask of the decoders (nesting, inputs,
/// requested outputs, elements per tensor). Each is checked while the body is read, before the
/// work it would cost is done, and a body past one is refused with invalid_argument naming the
/// limit and the value (the server answers 400). The body's size is limited apart from these
/// (server_options::max_body_bytes, 413).

#include <cstddef>
#include <cstdint>

namespace servekit::http {

struct request_limits {
  /// The deepest JSON nesting of a request body (/infer, /generate, the repository endpoints).
  /// No parser recursion depends on it; it bounds the parsers' own stacks. At most 512, the
  /// /infer reader's capacity.
  std::size_t max_json_depth = 512;
  /// Inputs in one infer or generate request (Triton has no limit; a model rarely has more than
  /// a few dozen).
  std::size_t max_inputs = 1024;
  /// Entries of one request's "outputs".
  std::size_t max_outputs = 1024;
  /// Elements of one input tensor, by its "shape" (2^28: 1 GiB of FP32, more than the default
  /// body limit carries).
  std::uint64_t max_tensor_elements = std::uint64_t{1} << 28U;
};

} // namespace servekit::http
