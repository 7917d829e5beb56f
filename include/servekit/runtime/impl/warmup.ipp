#pragma once
/// \file
/// Definitions for runtime/detail/warmup.hpp: building warmup samples' requests. Compiled once
/// into servekit::servekit (src/runtime/warmup.cpp), or included by warmup.hpp with
/// SERVEKIT_HEADER_ONLY.

#include <servekit/core/buffer.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/detail/linkage.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/runtime/detail/warmup.hpp>
#include <servekit/runtime/model_options.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace servekit::detail {

/// The pointer of warmup sample `k` (and of one of its inputs).
[[nodiscard]] SERVEKIT_DECL std::string warmup_path(std::size_t k) {
  return "/model_warmup/" + std::to_string(k);
}

/// An input name as a JSON pointer token (RFC 6901: '~' is "~0", '/' is "~1").
[[nodiscard]] SERVEKIT_DECL std::string warmup_pointer_token(std::string_view name) {
  std::string out;
  for (const char c : name) {
    out += c == '~' ? std::string{"~0"} : c == '/' ? std::string{"~1"} : std::string(1, c);
  }
  return out;
}

/// "sample 'name' (model_warmup[k])".
[[nodiscard]] SERVEKIT_DECL std::string warmup_sample_label(const model_warmup_options& sample,
                                                            std::size_t k) {
  return "warmup sample '" + sample.name + "' (model_warmup[" + std::to_string(k) + "])";
}

/// Random bytes whose floating-point elements stay finite: the highest exponent bit of each
/// element is cleared (|x| < 2), and BOOL elements are 0 or 1.
SERVEKIT_DECL void fill_random(std::span<std::byte> bytes, data_type type, std::mt19937& engine) {
  std::uniform_int_distribution<unsigned> byte_value{0, 255};
  for (auto& b : bytes) {
    b = static_cast<std::byte>(byte_value(engine));
  }
  const std::size_t size = byte_size(type);
  const bool floating = type == data_type::fp16 || type == data_type::bf16 ||
                        type == data_type::fp32 || type == data_type::fp64;
  for (std::size_t at = 0; at + size <= bytes.size(); at += size) {
    if (floating) {
      bytes[at + size - 1] &= std::byte{0xBF}; // little-endian: the top byte holds the sign
    } else if (type == data_type::boolean) {
      bytes[at] &= std::byte{0x01};
    }
  }
}

/// The whole file `<model folder>/warmup/<file>`. The model folder is Triton's: `directory`,
/// or its parent when `directory` is a version folder (`<model>/<N>/`) without the file.
[[nodiscard]] SERVEKIT_DECL std::vector<std::byte>
read_warmup_file(const std::string& directory, const std::string& file, const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path folder = directory.empty() ? fs::path{"."} : fs::path{directory};
  fs::path full = folder / "warmup" / file;
  std::error_code ignored;
  if (!fs::exists(full, ignored) && folder.has_parent_path()) {
    const fs::path model_level = folder.parent_path() / "warmup" / file;
    if (fs::exists(model_level, ignored)) {
      full = model_level;
    }
  }
  std::ifstream in{full, std::ios::binary};
  if (!in) {
    throw config_error(config_error_code::bad_value, path,
                       "cannot read warmup input_data_file '" + full.string() + "'");
  }
  const std::vector<char> chars{std::istreambuf_iterator<char>{in},
                                std::istreambuf_iterator<char>{}};
  std::vector<std::byte> out(chars.size());
  if (!chars.empty()) {
    std::memcpy(out.data(), chars.data(), chars.size());
  }
  return out;
}

/// One sample's worth (the dims, no batch dimension) of an input's data, as Triton makes it.
[[nodiscard]] SERVEKIT_DECL std::vector<std::byte>
warmup_sample_bytes(const std::string& name, const warmup_input_options& input,
                    const std::string& directory, const std::string& path, std::mt19937& engine) {
  std::int64_t elements = 1;
  for (const auto d : input.dims) {
    elements *= d;
  }
  const auto count = static_cast<std::size_t>(elements);
  const bool is_bytes = input.type == data_type::bytes;
  if (input.kind == warmup_data_kind::input_data_file) {
    auto data = read_warmup_file(directory, input.input_data_file, path + "/input_data_file");
    if (is_bytes) {
      const auto found = count_bytes_elements(data);
      if (!found || *found != count) {
        throw config_error(config_error_code::bad_value, path + "/input_data_file",
                           "warmup input '" + name + "': file '" + input.input_data_file +
                               "' must hold " + std::to_string(count) +
                               " BYTES elements (each a 4-byte little-endian length, then its "
                               "bytes)");
      }
    } else if (data.size() != count * byte_size(input.type)) {
      throw config_error(config_error_code::bad_value, path + "/input_data_file",
                         "warmup input '" + name + "': file '" + input.input_data_file +
                             "' holds " + std::to_string(data.size()) + " bytes, expected " +
                             std::to_string(count * byte_size(input.type)) + " (" +
                             std::to_string(count) + " elements of " +
                             std::string{to_config_string(input.type)} + ")");
    }
    return data;
  }
  if (is_bytes) {
    // Empty strings: a zero 4-byte length each (random_data falls back to this, as in Triton).
    return std::vector<std::byte>(count * 4);
  }
  std::vector<std::byte> data(count * byte_size(input.type));
  if (input.kind == warmup_data_kind::random_data) {
    fill_random(data, input.type, engine);
  }
  return data;
}

/// The request of warmup sample `k`: every input of `batch_size` rows (each row the sample's
/// data) when the model batches, or the bare dims when it does not (max_batch_size 0).
[[nodiscard]] SERVEKIT_DECL request
make_warmup_request(const model_warmup_options& sample, std::size_t k, std::int32_t max_batch_size,
                    std::span<const tensor_config> declared_inputs,
                    std::span<const std::string> sequence_inputs, const std::string& directory) {
  const std::string path = warmup_path(k);
  if (max_batch_size == 0 && sample.batch_size != 1) {
    throw config_error(config_error_code::bad_value, path + "/batch_size",
                       warmup_sample_label(sample, k) + " has batch_size " +
                           std::to_string(sample.batch_size) +
                           "; a model that does not batch (max_batch_size 0) takes 1");
  }
  if (max_batch_size > 0 && sample.batch_size > static_cast<std::uint32_t>(max_batch_size)) {
    throw config_error(config_error_code::bad_value, path + "/batch_size",
                       warmup_sample_label(sample, k) + " has batch_size " +
                           std::to_string(sample.batch_size) + ", more than max_batch_size " +
                           std::to_string(max_batch_size));
  }
  std::mt19937 engine{static_cast<std::mt19937::result_type>(k + 1)}; // reproducible
  request r;
  r.id = "warmup:" + sample.name;
  r.sequence_start = true;
  r.sequence_end = true;
  for (const auto& [name, input] : sample.inputs) {
    const std::string input_path = path + "/inputs/" + warmup_pointer_token(name);
    if (!declared_inputs.empty()) {
      const tensor_config* declared = nullptr;
      for (const auto& d : declared_inputs) {
        if (d.name == name) {
          declared = &d;
        }
      }
      bool sequence_input = false;
      for (const auto& n : sequence_inputs) {
        sequence_input = sequence_input || n == name;
      }
      if (declared == nullptr && !sequence_input) {
        throw config_error(config_error_code::bad_value, input_path,
                           warmup_sample_label(sample, k) + " names input '" + name +
                               "', which the model does not have");
      }
      if (declared != nullptr && declared->type != input.type) {
        throw config_error(config_error_code::bad_value, input_path + "/data_type",
                           warmup_sample_label(sample, k) + ": input '" + name + "' is " +
                               std::string{to_config_string(declared->type)} + ", not " +
                               std::string{to_config_string(input.type)});
      }
    }
    const auto one = warmup_sample_bytes(name, input, directory, input_path, engine);
    std::vector<std::int64_t> dims;
    const std::size_t rows = max_batch_size > 0 ? sample.batch_size : 1;
    if (max_batch_size > 0) {
      dims.push_back(static_cast<std::int64_t>(rows));
    }
    dims.insert(dims.end(), input.dims.begin(), input.dims.end());
    const auto s = shape::from(dims);
    if (!s) {
      throw config_error(config_error_code::bad_value, input_path + "/dims",
                         "too many dimensions for warmup input '" + name + "'");
    }
    buffer data = buffer::allocate(one.size() * rows);
    for (std::size_t row = 0; row < rows && !one.empty(); ++row) {
      std::memcpy(data.bytes().data() + row * one.size(), one.data(), one.size());
    }
    r.inputs.push_back(tensor{name, input.type, *s, std::move(data)});
  }
  return r;
}

} // namespace servekit::detail
