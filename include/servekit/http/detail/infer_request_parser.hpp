#pragma once
/// \file
/// infer_request_parser: the SAX handler behind decode_infer_request, which json_reader drives
/// through a KServe v2 infer request, and decode_scratch, the per-thread buffers it fills.
///
/// Its member functions are defined in detail/impl/infer_request_parser_events.ipp (the SAX
/// events: keys, values, arrays and objects) and detail/impl/infer_request_parser_tensors.ipp
/// (an input or output finished: checks and the tensor built), compiled into servekit::server
/// (core/detail/linkage.hpp). Only the decoders' implementations (http/impl/kserve_request.ipp,
/// http/impl/generate_request.ipp) include this header, and bench/bench_json_decode.cpp, which
/// feeds it from simdjson.

#include <servekit/core/buffer.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/http/decoded_infer_request.hpp>
#include <servekit/http/detail/checked_count.hpp>
#include <servekit/http/detail/half_float.hpp>
#include <servekit/http/detail/json_scalar.hpp>
#include <servekit/http/request_limits.hpp>

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace servekit::http::detail {

/// Per-thread buffers the decoder reuses from request to request, so that a steady stream of
/// requests allocates only the tensors it produces.
struct decode_scratch {
  std::vector<json_scalar> values; ///< the current input's "data" elements, in order
  std::string bytes;               ///< the current input's string elements, BYTES-serialised
  std::string unescaped;           ///< the JSON reader's buffer for strings with escapes

  void clear() noexcept {
    values.clear();
    bytes.clear();
    unescaped.clear();
  }
  /// Gives back memory after an unusually large request.
  void trim() {
    static constexpr std::size_t keep_values = std::size_t{1} << 16U;
    static constexpr std::size_t keep_bytes = std::size_t{1} << 20U;
    if (values.capacity() > keep_values) {
      std::vector<json_scalar>{}.swap(values);
    }
    if (bytes.capacity() > keep_bytes) {
      std::string{}.swap(bytes);
    }
    if (unescaped.capacity() > keep_bytes) {
      std::string{}.swap(unescaped);
    }
  }
};

/// The calling thread's scratch.
[[nodiscard]] SERVEKIT_DECL decode_scratch& thread_decode_scratch();

/// The SAX handler behind decode_infer_request. It follows where it is in the request with a
/// small stack of contexts; a key sets `pending_`, which says what the next value is.
class infer_request_parser {
public:
  infer_request_parser(decode_scratch& scratch, decoded_infer_request& out,
                       std::span<const std::byte> binary, const request_limits& limits = {})
      : scratch_{scratch}, out_{out}, binary_{binary}, limits_{limits} {}

  /// The size of the JSON text being read, which bounds how many elements an input's "data" can
  /// hold (each takes at least 2 bytes); reserve_data reserves for them when "shape" came first.
  void set_text_size(std::size_t bytes) noexcept { text_size_ = bytes; }

  [[nodiscard]] status take_error() { return std::move(error_); }
  [[nodiscard]] bool failed() const noexcept { return !error_.ok(); }

  /// Checks that run once the whole JSON has been read.
  [[nodiscard]] bool finish() {
    if (binary_used_ != binary_.size()) {
      return fail(fmt::format("the request carries {} bytes of binary data after its JSON "
                              "header, but its inputs' 'binary_data_size' add up to {}",
                              binary_.size(), binary_used_));
    }
    return true;
  }

  // --- SAX interface (json_reader) -------------------------------------------------------------
  bool null() { return value(json_scalar{}, {}); }
  bool boolean(bool v) {
    json_scalar s;
    s.tag = json_scalar::kind::boolean;
    s.b = v;
    return value(s, {});
  }
  bool number_integer(std::int64_t v) {
    json_scalar s;
    s.tag = json_scalar::kind::integer;
    s.i = v;
    return value(s, {});
  }
  bool number_unsigned(std::uint64_t v) {
    json_scalar s;
    s.tag = json_scalar::kind::unsigned_integer;
    s.u = v;
    return value(s, {});
  }
  bool number_float(double v) {
    json_scalar s;
    s.tag = json_scalar::kind::floating;
    s.d = v;
    return value(s, {});
  }
  bool string(std::string_view v) {
    json_scalar s;
    s.tag = json_scalar::kind::string;
    return value(s, v);
  }
  bool start_object(std::size_t /*unknown size*/) { return start(true); }
  bool start_array(std::size_t /*unknown size*/) { return start(false); }
  bool end_object() { return end(); }
  bool end_array() { return end(); }
  bool key(std::string_view k);
  bool parse_error(std::string message) {
    return fail(fmt::format("failed to parse the request JSON: {}", message));
  }

private:
  enum class ctx : std::uint8_t {
    before_root,
    root,
    params,
    inputs,
    input,
    input_params,
    shape,
    data,
    outputs,
    output,
    output_params,
    skip,
    done,
  };

  enum class field : std::uint8_t {
    none,
    ignore, // a value servekit does not use: skipped whatever its type
    id,
    parameters,
    inputs,
    outputs,
    sequence_id,
    sequence_start,
    sequence_end,
    priority,
    timeout,
    binary_data_output,
    other_parameter,
    name,
    shape,
    datatype,
    data,
    binary_data_size,
    binary_data,
  };

  // Bits of the keys seen in the current object, to refuse duplicates (a DOM would keep the last
  // one silently; two "data" arrays would otherwise be concatenated here).
  static constexpr std::uint32_t bit(field f) noexcept {
    return std::uint32_t{1} << static_cast<unsigned>(f);
  }

  /// The input being read. Its fields may arrive in any order, so "data" is kept as scalars in
  /// the scratch and converted when the object ends.
  struct pending_input {
    std::string name;
    bool has_name = false;
    std::optional<data_type> type;
    servekit::shape dims;
    bool has_shape = false;
    bool has_data = false;
    bool data_is_array = false;
    std::optional<std::uint64_t> binary_size;
    std::uint32_t seen = 0;
    std::uint32_t seen_params = 0;
    // The nesting of "data": depth of the open array (1 = the outermost), the deepest level seen,
    // the length of the first array closed at each level, the count in the open array at each
    // level, and the depth the scalars sit at.
    std::size_t depth = 0;
    std::size_t max_depth = 0;
    std::array<std::int64_t, shape::max_rank> level_len{};
    std::array<std::int64_t, shape::max_rank> level_count{};
    std::size_t leaf_depth = 0;
    bool ragged = false;
  };

  struct pending_output {
    std::string name;
    bool has_name = false;
    bool binary = false;
    std::uint32_t seen = 0;
    std::uint32_t seen_params = 0;
  };

  [[nodiscard]] ctx top() const noexcept { return stack_[depth_ - 1]; }
  bool push(ctx c) {
    if (depth_ == stack_.size()) {
      return fail("the request JSON is nested too deeply"); // unreachable: contexts are bounded
    }
    stack_[depth_++] = c;
    return true;
  }
  void pop() noexcept { --depth_; }

  bool fail(std::string message) {
    if (error_.ok()) {
      error_ = invalid_argument(std::move(message));
    }
    return false;
  }

  [[nodiscard]] std::string input_label() const {
    if (input_.has_name) {
      return fmt::format("input '{}'", input_.name);
    }
    return fmt::format("inputs[{}]", input_index_);
  }
  [[nodiscard]] std::string output_label() const {
    if (output_.has_name) {
      return fmt::format("output '{}'", output_.name);
    }
    return fmt::format("outputs[{}]", output_index_);
  }

  /// The object a key belongs to, for the duplicate-key message. Named lazily: this runs for
  /// every key of every request, the message almost never.
  enum class key_owner : std::uint8_t {
    request,
    request_parameters,
    input,
    input_parameters,
    output,
    output_parameters
  };
  [[nodiscard]] std::string owner_name(key_owner owner) const {
    switch (owner) {
    case key_owner::request:
      return "the request";
    case key_owner::request_parameters:
      return "'parameters'";
    case key_owner::input:
      return input_label();
    case key_owner::input_parameters:
      return input_label() + " 'parameters'";
    case key_owner::output:
      return output_label();
    case key_owner::output_parameters:
      return output_label() + " 'parameters'";
    }
    return {};
  }

  bool mark_seen(std::uint32_t& seen, field f, std::string_view key, key_owner owner) {
    if ((seen & bit(f)) != 0) {
      return fail(fmt::format("duplicate key '{}' in {}", key, owner_name(owner)));
    }
    seen |= bit(f);
    pending_ = f;
    return true;
  }

  /// True when `name` is none of the `count` names `name_at(i)` gives, then counted among them:
  /// a scan for the usual handful (no allocation), a hash set past that (filled on first use and
  /// kept up to date), so a request with tens of thousands of inputs decodes in linear time.
  template <class NameAt>
  static bool first_of_name(std::unordered_set<std::string>& seen, std::size_t count,
                            const std::string& name, NameAt name_at) {
    static constexpr std::size_t scan_up_to = 16;
    if (count < scan_up_to) {
      for (std::size_t i = 0; i < count; ++i) {
        if (name_at(i) == name) {
          return false;
        }
      }
      return true;
    }
    if (seen.empty()) {
      seen.reserve(2 * count);
      for (std::size_t i = 0; i < count; ++i) {
        seen.emplace(name_at(i));
      }
    }
    return seen.insert(name).second;
  }

  bool value(const json_scalar& s, std::string_view text);
  bool start(bool object);
  bool end();

  bool root_value(const json_scalar& s, std::string_view text);
  bool parameter_value(const json_scalar& s, std::string_view text);
  /// A parameter servekit does not interpret, kept for the backend in request.parameters.
  bool custom_parameter(const json_scalar& s, std::string_view text);
  [[gnu::cold]] bool fail_parameter_type(std::string_view got);
  bool input_value(const json_scalar& s, std::string_view text);
  bool data_value(const json_scalar& s, std::string_view text);
  /// data_value's error, out of its way: it runs once per element.
  [[gnu::cold]] bool fail_too_many_elements();
  bool shape_value(const json_scalar& s);

  /// Reserves the scratch for the input's elements when its "shape" came before "data" (as
  /// clients send it): growing by doubling held up to 3x the elements while the last copy was
  /// made (a 57 MiB body of numbers took 11x its size). Never more than the text can hold nor
  /// max_tensor_elements: a shape cannot make the decoder allocate ahead of the data.
  void reserve_data() {
    if (!input_.has_shape || text_size_ == 0) {
      return;
    }
    const auto count = checked_element_count(input_.dims);
    if (!count) {
      return;
    }
    std::uint64_t n = *count;
    n = n < limits_.max_tensor_elements ? n : limits_.max_tensor_elements;
    const std::uint64_t fits = text_size_ / 2 + 1;
    n = n < fits ? n : fits;
    scratch_.values.reserve(static_cast<std::size_t>(n));
  }

  void begin_data_array() noexcept {
    input_.has_data = true;
    input_.data_is_array = true;
    input_.depth = 1;
    input_.max_depth = 1;
    input_.level_count[0] = 0;
    input_.level_len.fill(-1);
  }

  bool finish_input();
  bool finish_output();
  bool convert_data(tensor& t, std::size_t count);
  bool element_error(std::size_t index, const json_scalar& s, std::string_view expected) {
    return fail(fmt::format("{}: 'data' element {} must be {}, got {}", input_label(), index,
                            expected, describe(s)));
  }

  decode_scratch& scratch_;
  decoded_infer_request& out_;
  std::span<const std::byte> binary_;
  request_limits limits_;
  std::unordered_set<std::string> input_names_;     // past first_of_name's scan
  std::unordered_set<std::string> output_names_;    // likewise
  std::unordered_set<std::string> parameter_names_; // likewise, for request.parameters
  std::size_t binary_used_ = 0;
  std::size_t text_size_ = 0; // 0: unknown (set_text_size)
  status error_;

  std::array<ctx, 8> stack_{ctx::before_root};
  std::size_t depth_ = 1;
  std::size_t skip_depth_ = 0;
  field pending_ = field::none;
  std::string parameter_name_; // the top-level parameter being read, for messages
  std::uint32_t root_seen_ = 0;
  std::uint32_t params_seen_ = 0;
  bool inputs_seen_ = false;

  pending_input input_;
  std::size_t input_index_ = 0;
  pending_output output_;
  std::size_t output_index_ = 0;
};

/// The frame shared by the decoders that drive infer_request_parser (decode_infer_request,
/// decode_generate_request): `feed(parser, scratch)` sends the parser its events and returns false
/// once one was refused; the parser's first error, or the memory error, is the result. The
/// calling thread's scratch is cleared before and after, and trimmed after.
template <class Feed>
[[nodiscard]] status decode_with_parser(decoded_infer_request& out,
                                        std::span<const std::byte> binary,
                                        const request_limits& limits, Feed&& feed) {
  auto& scratch = thread_decode_scratch();
  scratch.clear();
  status result;
  try {
    out.request.inputs.reserve(4);
    infer_request_parser parser{scratch, out, binary, limits};
    const bool fed = std::forward<Feed>(feed)(parser, scratch);
    if (!fed || parser.failed() || !parser.finish()) {
      result = parser.take_error();
      if (result.ok()) {
        result = invalid_argument("failed to parse the request JSON");
      }
    }
  } catch (const std::bad_alloc&) {
    result = resource_exhausted("out of memory while decoding the request");
  } catch (const std::exception& e) {
    result = invalid_argument(fmt::format("failed to decode the request: {}", e.what()));
  }
  scratch.clear();
  scratch.trim();
  return result;
}

/// decode_with_parser with the default request_limits.
template <class Feed>
[[nodiscard]] status decode_with_parser(decoded_infer_request& out,
                                        std::span<const std::byte> binary, Feed&& feed) {
  return decode_with_parser(out, binary, request_limits{}, std::forward<Feed>(feed));
}

} // namespace servekit::http::detail

#if defined(SERVEKIT_HEADER_ONLY)
#include <servekit/http/detail/impl/infer_request_parser_events.ipp>
#include <servekit/http/detail/impl/infer_request_parser_tensors.ipp>
#endif
