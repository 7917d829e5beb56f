#pragma once
/// \file
/// The LibTorch backend's model state (libtorch/backend.hpp): reading the TorchScript file and
/// checking forward() against the config, and the types both it and execution use. This file
/// and backend.ipp are the only ones that include torch; src/libtorch/backend.cpp compiles them
/// once (see core/detail/linkage.hpp).

#include <servekit/backend/instance_context.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/libtorch/backend.hpp>
#include <servekit/libtorch/tensor_naming.hpp>

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstddef>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace servekit::libtorch {

namespace detail {

/// torch's element type for a data type; nothing for the types LibTorch has no tensors of
/// (UINT16, UINT32, UINT64, BYTES).
[[nodiscard]] inline std::optional<at::ScalarType> scalar_type_of(data_type type) noexcept {
  switch (type) {
  case data_type::boolean:
    return at::kBool;
  case data_type::uint8:
    return at::kByte;
  case data_type::int8:
    return at::kChar;
  case data_type::int16:
    return at::kShort;
  case data_type::int32:
    return at::kInt;
  case data_type::int64:
    return at::kLong;
  case data_type::fp16:
    return at::kHalf;
  case data_type::bf16:
    return at::kBFloat16;
  case data_type::fp32:
    return at::kFloat;
  case data_type::fp64:
    return at::kDouble;
  default:
    return std::nullopt;
  }
}

/// A configured input or output and its place in forward(): the argument it feeds, or the
/// result it reads.
struct bound_tensor {
  std::string name;
  data_type type = data_type::invalid;
  at::ScalarType scalar = at::kFloat;
  std::size_t position = 0;
  bool always = false;  ///< an implicit state's output: returned whatever the request asks for
  bool control = false; ///< a sequence batcher control: [batch, 1] in a batching model, as Triton
};

/// A model's checked TorchScript file (the model state's contents).
class model_file {
public:
  std::string model_name;
  std::string file;                  ///< `<model>/<version>/model.pt`, for messages
  std::string bytes;                 ///< its contents: each instance loads its own module from them
  std::vector<bound_tensor> inputs;  ///< in forward()'s argument order
  std::vector<bound_tensor> outputs; ///< in the config's order
  naming_convention input_naming = naming_convention::config_order;
  naming_convention output_naming = naming_convention::config_order;
  bool batched = false;       ///< max_batch_size > 0: dimension 0 is the batch
  bool inference_mode = true; ///< c10::InferenceMode around forward()
  int intra_op_threads = 0;   ///< 0: torch's default
};

/// One instance's module and the argument list it reuses.
class instance_module {
public:
  instance_module(const model_file& m, torch::jit::Module mod) : model{m}, module{std::move(mod)} {}

  const model_file& model;
  torch::jit::Module module;
  std::vector<c10::IValue> arguments;
};

/// A torch exception's message without the C++ backtrace c10::Error appends.
[[nodiscard]] inline std::string torch_message(const std::exception& e) {
  if (const auto* error = dynamic_cast<const c10::Error*>(&e)) {
    return error->what_without_backtrace();
  }
  return e.what();
}

/// The file's contents. `shown` names it in messages.
[[nodiscard]] inline std::string read_model_file(const std::filesystem::path& path,
                                                 const std::string& shown,
                                                 std::string_view filename) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw std::runtime_error("the LibTorch backend found no model file '" + shown + "' (it loads " +
                             std::string{filename} +
                             " from the version folder, a TorchScript file; the config's "
                             "default_model_filename names another)");
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw std::runtime_error("the LibTorch backend's model file '" + shown + "' is not a file");
  }
  const auto size = std::filesystem::file_size(path, ec);
  std::string bytes(ec ? 0 : static_cast<std::size_t>(size), '\0');
  std::ifstream in{path, std::ios::binary};
  if (ec || !in || !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    throw std::runtime_error("the LibTorch backend could not read model file '" + shown + "'");
  }
  return bytes;
}

/// How messages name the model file: within the repository (`<model>/<version>/model.pt`),
/// never by its host path, since load errors reach clients (as the repository names config
/// files).
[[nodiscard]] inline std::string shown_file(const model_context& context,
                                            const std::filesystem::path& folder,
                                            const std::string& filename) {
  if (context.directory.empty()) {
    return filename;
  }
  const std::string version = std::to_string(context.model_version);
  // A repository hands over the version folder, or the model folder for a model without one.
  const bool version_folder = folder.filename() == version;
  return std::string{context.model_name} + "/" + (version_folder ? version + "/" : "") + filename;
}

/// A module loaded from the model's bytes, in eval mode.
[[nodiscard]] inline torch::jit::Module load_module(const model_file& model) {
  std::istringstream in{model.bytes};
  try {
    torch::jit::Module module = torch::jit::load(in, c10::Device{c10::kCPU});
    module.eval();
    return module;
  } catch (const std::exception& e) {
    throw std::runtime_error("'" + model.file +
                             "' is not a TorchScript model LibTorch can load: " + torch_message(e));
  }
}

/// A model parameter holding a thread count: nothing set is 0 (torch's default).
[[nodiscard]] inline int thread_count_parameter(const model_context& context,
                                                std::string_view key) {
  const auto value = context.parameter(key);
  if (!value) {
    return 0;
  }
  int count = 0;
  const char* end = value->data() + value->size();
  const auto [stop, ec] = std::from_chars(value->data(), end, count);
  if (ec != std::errc{} || stop != end || count < 0) {
    throw std::invalid_argument("model parameter " + std::string{key} +
                                " must be a thread count (a non-negative integer), got '" +
                                std::string{*value} + "'");
  }
  return count;
}

/// A boolean model parameter ("true" or "false", any case, as Triton reads them).
[[nodiscard]] inline bool flag_parameter(const model_context& context, std::string_view key,
                                         bool fallback) {
  const auto value = context.parameter(key);
  if (!value) {
    return fallback;
  }
  std::string lower{*value};
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "true") {
    return true;
  }
  if (lower == "false") {
    return false;
  }
  throw std::invalid_argument("model parameter " + std::string{key} +
                              " must be \"true\" or \"false\", got '" + std::string{*value} + "'");
}

/// LibTorch has one inter-op pool per process, sized once before it is first used: the first
/// model that asks sets it; a later model asking for another size is told so on std::clog and
/// shares the pool (Triton warns the same way).
inline void set_inter_op_threads(int count, std::string_view model_name) {
  static std::mutex mutex;
  static int chosen = 0;
  const std::lock_guard lock{mutex};
  if (count == 0 || count == chosen) {
    return;
  }
  if (chosen != 0) {
    std::clog << "servekit: model '" << model_name << "': INTER_OP_THREAD_COUNT " << count
              << " ignored: LibTorch's inter-op pool is one per process, and an earlier model "
                 "sized it "
              << chosen << "\n";
    return;
  }
  try {
    at::set_num_interop_threads(count);
    chosen = count;
  } catch (const std::exception& e) {
    std::clog << "servekit: model '" << model_name << "': INTER_OP_THREAD_COUNT " << count
              << " ignored: " << torch_message(e) << "\n";
  }
}

/// The tensors forward() returns: 1 for a Tensor, the size of a tuple of Tensors.
[[nodiscard]] inline std::size_t result_count(const c10::FunctionSchema& schema,
                                              const std::string& file) {
  const auto& returns = schema.returns();
  if (returns.size() == 1) {
    const c10::TypePtr& type = returns[0].type();
    if (type->kind() == c10::TypeKind::TensorType) {
      return 1;
    }
    if (type->kind() == c10::TypeKind::TupleType) {
      const auto elements = type->containedTypes();
      const bool all_tensors = std::all_of(elements.begin(), elements.end(), [](const auto& t) {
        return t->kind() == c10::TypeKind::TensorType;
      });
      if (all_tensors && !elements.empty()) {
        return elements.size();
      }
    }
  }
  std::string returned;
  for (const auto& r : returns) {
    returned += (returned.empty() ? "" : ", ") + r.type()->annotation_str();
  }
  throw std::runtime_error("forward() of '" + file + "' returns " + returned +
                           "; the LibTorch backend reads a Tensor or a tuple of Tensors");
}

/// forward()'s argument names (`self` left out), each of which must take a Tensor.
[[nodiscard]] inline std::vector<std::string> argument_names(const c10::FunctionSchema& schema,
                                                             const std::string& file) {
  std::vector<std::string> names;
  const auto& arguments = schema.arguments();
  const std::size_t first = !arguments.empty() && arguments[0].name() == "self" ? 1 : 0;
  for (std::size_t k = first; k < arguments.size(); ++k) {
    const auto& argument = arguments[k];
    if (argument.type()->kind() != c10::TypeKind::TensorType) {
      throw std::runtime_error("forward() of '" + file + "' takes argument '" + argument.name() +
                               "' as " + argument.type()->annotation_str() +
                               "; the LibTorch backend passes every input as a Tensor");
    }
    names.push_back(argument.name());
  }
  return names;
}

/// The configured tensors, checked for what the backend cannot give torch, at the places
/// `binding` found for them.
[[nodiscard]] inline std::vector<bound_tensor>
bind_tensors(std::span<const tensor_config> configured, const tensor_binding& binding,
             std::string_view what) {
  std::vector<bound_tensor> out;
  for (std::size_t k = 0; k < configured.size(); ++k) {
    const tensor_config& t = configured[k];
    const auto scalar = scalar_type_of(t.type);
    if (!scalar) {
      throw std::runtime_error(
          std::string{what} + " '" + t.name + "' is " + std::string{to_config_string(t.type)} +
          ", which LibTorch has no tensors of (the LibTorch backend takes TYPE_BOOL, TYPE_UINT8, "
          "TYPE_INT8, TYPE_INT16, TYPE_INT32, TYPE_INT64, TYPE_FP16, TYPE_BF16, TYPE_FP32 and "
          "TYPE_FP64)");
    }
    if (t.allow_ragged_batch) {
      throw std::runtime_error(std::string{what} + " '" + t.name +
                               "' sets allow_ragged_batch, which the LibTorch backend does not "
                               "support (it concatenates a batch's requests along dimension 0)");
    }
    if (t.optional) {
      throw std::runtime_error(std::string{what} + " '" + t.name +
                               "' is optional, which the LibTorch backend does not support "
                               "(forward() takes every input)");
    }
    if (t.is_shape_tensor) {
      throw std::runtime_error(std::string{what} + " '" + t.name +
                               "' is a shape tensor, which the LibTorch backend does not support");
    }
    out.push_back({t.name, t.type, *scalar, binding.positions[k]});
  }
  return out;
}

[[nodiscard]] inline std::vector<std::string> names_of(std::span<const tensor_config> tensors) {
  std::vector<std::string> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) {
    out.push_back(t.name);
  }
  return out;
}

/// Reads, loads and checks the model file against the config.
[[nodiscard]] inline std::unique_ptr<const model_file>
load_and_check(const model_context& context) {
  auto model = std::make_unique<model_file>();
  model->model_name = context.model_name;
  const std::string filename{context.default_model_filename.empty()
                                 ? libtorch::default_model_filename
                                 : context.default_model_filename};
  // The repository's folder for this version (the working directory outside a repository).
  const std::filesystem::path folder{std::string{context.directory}};
  model->file = shown_file(context, folder, filename);
  model->bytes = read_model_file(folder / filename, model->file, filename);
  model->batched = context.max_batch_size > 0;
  model->inference_mode = flag_parameter(context, "INFERENCE_MODE", true);
  model->intra_op_threads = thread_count_parameter(context, "INTRA_OP_THREAD_COUNT");
  const int inter_op_threads = thread_count_parameter(context, "INTER_OP_THREAD_COUNT");

  const torch::jit::Module module = load_module(*model);
  const auto forward = module.find_method("forward");
  if (!forward) {
    throw std::runtime_error("'" + model->file + "' has no forward() method");
  }
  const c10::FunctionSchema& schema = forward->function().getSchema();
  const auto arguments = argument_names(schema, model->file);
  const std::size_t results = result_count(schema, model->file);

  // Under the sequence batcher, forward() also takes the control inputs and the implicit
  // states, and returns the states' next values (Triton counts them the same way).
  std::vector<tensor_config> all_inputs{context.inputs.begin(), context.inputs.end()};
  all_inputs.insert(all_inputs.end(), context.sequence_inputs.begin(),
                    context.sequence_inputs.end());
  std::vector<tensor_config> all_outputs{context.outputs.begin(), context.outputs.end()};
  all_outputs.insert(all_outputs.end(), context.state_outputs.begin(), context.state_outputs.end());
  tensor_binding inputs;
  tensor_binding outputs;
  try {
    inputs = bind_inputs(names_of(all_inputs), arguments);
    outputs = bind_outputs(names_of(all_outputs), results);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error("'" + model->file + "' does not fit the config: " + e.what());
  }
  if (!context.state_outputs.empty() && (inputs.convention != naming_convention::named_index ||
                                         outputs.convention != naming_convention::named_index)) {
    throw std::runtime_error(
        "'" + model->file +
        "' keeps implicit state, so every input, output and state must be named "
        "<name>__<index> (Triton's rule); the inputs follow " +
        std::string{to_string(inputs.convention)} + ", the outputs " +
        std::string{to_string(outputs.convention)});
  }
  model->input_naming = inputs.convention;
  model->output_naming = outputs.convention;
  model->inputs = bind_tensors(all_inputs, inputs, "input");
  // The control inputs come first among the sequence inputs, then the states' inputs.
  const std::size_t controls = context.sequence_inputs.size() - context.state_outputs.size();
  for (std::size_t k = context.inputs.size(); k < context.inputs.size() + controls; ++k) {
    model->inputs[k].control = true;
  }
  std::sort(model->inputs.begin(), model->inputs.end(),
            [](const bound_tensor& a, const bound_tensor& b) { return a.position < b.position; });
  model->outputs = bind_tensors(all_outputs, outputs, "output");
  for (std::size_t k = context.outputs.size(); k < model->outputs.size(); ++k) {
    model->outputs[k].always = true;
  }

  set_inter_op_threads(inter_op_threads, model->model_name);
  return model;
}

} // namespace detail

SERVEKIT_DECL torchscript_model::torchscript_model(const model_context& context)
    : loaded_{detail::load_and_check(context)} {}

SERVEKIT_DECL torchscript_model::~torchscript_model() = default;

} // namespace servekit::libtorch
