#pragma once
/// \file
/// servekit::onnx::backend: ONNX models run by OpenCV's DNN module (OpenCV 4.6, Debian 12's
/// libopencv-dnn-dev; ONNX Runtime is not packaged there). Serves `<version>/model.onnx`
/// (`default_model_filename` overrides the name) for configs that say `backend: "onnx"` or
/// Triton's `platform: "onnxruntime_onnx"`:
///
///     using backends = servekit::backend_list<
///         servekit::named_backend<"onnx", servekit::onnx::backend>>;
///
/// - Auto-complete (runtime/auto_complete.hpp): a config may leave out `input`, `output` and
///   `max_batch_size`; they come from the graph. As Triton's ONNX Runtime backend, a graph whose
///   inputs and outputs all have a first dimension of any size gets max_batch_size 4 and, with
///   no scheduler given, `dynamic_batching {}`; any other graph gets max_batch_size 0.
/// - A config that lists tensors must agree with the graph: every graph input listed, each with
///   the graph's data type and compatible dims (the batch dimension included when
///   max_batch_size > 0); every output listed must be a graph output. The load fails otherwise,
///   naming the tensor and the file.
/// - One cv::dnn::Net per instance. A batch of requests runs as one forward pass, its inputs
///   concatenated along dim 0 and its outputs split back by each request's rows.
/// - OpenCV's DNN module computes in FP32: inputs of other types are converted to FP32 and
///   outputs converted back to the type the config declares, so integers are exact only below
///   2^24 in magnitude and FP64 is rounded to FP32. docs/backends.md lists what else differs
///   from Triton's ONNX Runtime backend.

#include <servekit/backend/batch.hpp>
#include <servekit/backend/instance_context.hpp>
#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/onnx/onnx_graph.hpp>
#include <servekit/runtime/model_options.hpp>

#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/dnn.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit::onnx {

/// The file name a version folder holds when the config names none.
inline constexpr std::string_view default_model_file = "model.onnx";

/// Triton's default max_batch_size for an auto-completed model that can batch
/// (`--backend-config=default-max-batch-size`, 4).
inline constexpr std::int32_t default_max_batch_size = 4;

/// The model file of a model whose folder is `directory` and whose config names `file_name`.
[[nodiscard]] inline std::filesystem::path model_file(std::string_view directory,
                                                      std::string_view file_name) {
  return std::filesystem::path{directory} /
         std::filesystem::path{file_name.empty() ? default_model_file : file_name};
}

namespace detail {

/// `dims` without its first entry (the batch dimension).
[[nodiscard]] inline shape without_batch_dim(const shape& dims) {
  return shape{std::span<const std::int64_t>{dims.begin() + 1, dims.rank() - 1}};
}

/// Whether a config's dims (with the batch dim prepended when batching) admit the graph's:
/// same rank, and each pair equal or either of any size.
[[nodiscard]] inline bool dims_agree(const shape& config, const shape& graph) {
  if (config.rank() != graph.rank()) {
    return false;
  }
  for (std::size_t i = 0; i < config.rank(); ++i) {
    if (config[i] != -1 && graph[i] != -1 && config[i] != graph[i]) {
      return false;
    }
  }
  return true;
}

[[nodiscard]] inline std::string dims_text(const shape& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.rank(); ++i) {
    out += (i == 0 ? "" : ", ") + std::to_string(dims[i]);
  }
  return out + "]";
}

[[nodiscard]] inline const tensor_config* find(const std::vector<tensor_config>& list,
                                               std::string_view name) {
  const auto it = std::find_if(list.begin(), list.end(),
                               [&](const tensor_config& t) { return t.name == name; });
  return it == list.end() ? nullptr : &*it;
}

/// The config's view of a graph tensor: its dims with the batch dimension prepended.
[[nodiscard]] inline shape with_batch_dim(const shape& dims, bool batching) {
  if (!batching) {
    return dims;
  }
  std::vector<std::int64_t> out{-1};
  out.insert(out.end(), dims.begin(), dims.begin() + dims.rank());
  return shape{out};
}

/// Checks the config's tensors against the graph's; config_error naming the tensor otherwise.
inline void check_against_graph(std::span<const tensor_config> inputs,
                                std::span<const tensor_config> outputs, bool batching,
                                const graph_signature& graph, const std::string& file) {
  const auto check = [&](const tensor_config& listed, const tensor_config& in_graph,
                         std::string_view field, std::size_t index) {
    const std::string at = "/" + std::string{field} + "/" + std::to_string(index);
    if (listed.type != in_graph.type) {
      throw config_error(config_error_code::bad_value, at + "/data_type",
                         std::string{field} + " '" + listed.name + "' is " +
                             std::string{to_config_string(listed.type)} + " but " + file +
                             " declares it " + std::string{to_config_string(in_graph.type)});
    }
    const shape config_dims = with_batch_dim(listed.dims, batching);
    if (!dims_agree(config_dims, in_graph.dims)) {
      throw config_error(config_error_code::bad_value, at + "/dims",
                         std::string{field} + " '" + listed.name + "' has dims " +
                             dims_text(config_dims) +
                             (batching ? " with the batch dimension" : "") + " but " + file +
                             " declares " + dims_text(in_graph.dims));
    }
  };
  for (const auto& graph_input : graph.inputs) {
    bool listed = false;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].name == graph_input.name) {
        check(inputs[i], graph_input, "input", i);
        listed = true;
      }
    }
    if (!listed) {
      throw config_error(config_error_code::bad_value, "/input",
                         "the graph in " + file + " has input '" + graph_input.name +
                             "', which the config does not list");
    }
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (find(graph.inputs, inputs[i].name) == nullptr) {
      throw config_error(config_error_code::bad_value, "/input/" + std::to_string(i) + "/name",
                         "input '" + inputs[i].name + "' is not an input of the graph in " + file);
    }
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const tensor_config* in_graph = find(graph.outputs, outputs[i].name);
    if (in_graph == nullptr) {
      throw config_error(config_error_code::bad_value, "/output/" + std::to_string(i) + "/name",
                         "output '" + outputs[i].name + "' is not an output of the graph in " +
                             file);
    }
    check(outputs[i], *in_graph, "output", i);
  }
}

/// The OpenCV matrix type servekit's data type is given to the network as: FP32 as it is (no
/// copy), every other type converted to FP32, what OpenCV's DNN module computes in.
[[nodiscard]] inline bool passes_unconverted(data_type type) noexcept {
  return type == data_type::fp32;
}

/// Calls `f(T{})` with the C++ element type of `type` (BOOL as std::uint8_t) and returns true;
/// false for the types without one (FP16, BF16, BYTES).
template <class F>
bool with_element_type(data_type type, F&& f) {
  switch (type) {
  case data_type::boolean:
  case data_type::uint8:
    f(std::uint8_t{});
    return true;
  case data_type::int8:
    f(std::int8_t{});
    return true;
  case data_type::uint16:
    f(std::uint16_t{});
    return true;
  case data_type::int16:
    f(std::int16_t{});
    return true;
  case data_type::uint32:
    f(std::uint32_t{});
    return true;
  case data_type::int32:
    f(std::int32_t{});
    return true;
  case data_type::uint64:
    f(std::uint64_t{});
    return true;
  case data_type::int64:
    f(std::int64_t{});
    return true;
  case data_type::fp32:
    f(float{});
    return true;
  case data_type::fp64:
    f(double{});
    return true;
  default:
    return false;
  }
}

/// Converts `count` elements of `type` at `src` to float at `dst`.
inline void to_float(data_type type, const std::byte* src, float* dst, std::size_t count) {
  if (type == data_type::fp16) {
    const cv::Mat half{1, static_cast<int>(count), CV_16F, const_cast<std::byte*>(src)};
    cv::Mat single{1, static_cast<int>(count), CV_32F, dst};
    half.convertTo(single, CV_32F);
    return;
  }
  const bool converted = with_element_type(type, [&]<class T>(T) {
    for (std::size_t i = 0; i < count; ++i) {
      T v;
      std::memcpy(&v, src + i * sizeof(T), sizeof(T));
      dst[i] = static_cast<float>(v);
    }
  });
  if (!converted) {
    throw std::invalid_argument("data type " + std::string{to_string(type)} +
                                " cannot be given to OpenCV's DNN module");
  }
}

/// Converts `count` values of an OpenCV output matrix (CV_32F, CV_32S, CV_64F or CV_16F) into
/// `type` at `dst`.
inline void from_mat(const cv::Mat& mat, std::size_t first, std::size_t count, data_type type,
                     std::byte* dst) {
  cv::Mat single;
  if (mat.depth() == CV_32F) {
    single = mat;
  } else {
    mat.convertTo(single, CV_32F);
  }
  const float* src = single.ptr<float>() + first;
  if (type == data_type::fp16) {
    const cv::Mat in{1, static_cast<int>(count), CV_32F, const_cast<float*>(src)};
    cv::Mat half{1, static_cast<int>(count), CV_16F, dst};
    in.convertTo(half, CV_16F);
    return;
  }
  if (type == data_type::boolean) {
    for (std::size_t i = 0; i < count; ++i) {
      dst[i] = std::byte{src[i] != 0.0F ? std::uint8_t{1} : std::uint8_t{0}};
    }
    return;
  }
  const bool converted = with_element_type(type, [&]<class T>(T) {
    for (std::size_t i = 0; i < count; ++i) {
      const T v = static_cast<T>(src[i]);
      std::memcpy(dst + i * sizeof(T), &v, sizeof(T));
    }
  });
  if (!converted) {
    throw std::invalid_argument("OpenCV's DNN module cannot produce " +
                                std::string{to_string(type)});
  }
}

/// The dims of an output OpenCV computed as `mat` (`total` values), in the graph's terms.
/// OpenCV's matrices have rank 2 at least, so a graph output of rank 0 or 1 comes back as
/// [1, n]: where the ranks differ, the graph's dims are taken, with one size of any value
/// inferred from the count; leading ones are dropped where that is not possible.
[[nodiscard]] inline std::vector<std::int64_t> output_dims(const cv::Mat& mat, const shape& graph,
                                                           std::size_t total) {
  std::vector<std::int64_t> dims(mat.size.p, mat.size.p + mat.dims);
  if (graph.empty() && total == 1) {
    return {}; // a scalar
  }
  if (dims.size() == graph.rank() || graph.empty()) {
    return dims;
  }
  std::int64_t known = 1;
  std::size_t unknown = 0;
  for (const auto d : graph) {
    if (d == -1) {
      ++unknown;
    } else {
      known *= d;
    }
  }
  const auto count = static_cast<std::int64_t>(total);
  if (unknown <= 1 && known > 0 && count % known == 0 && (unknown == 1 || known == count)) {
    std::vector<std::int64_t> out(graph.begin(), graph.begin() + graph.rank());
    for (auto& d : out) {
      if (d == -1) {
        d = count / known;
      }
    }
    return out;
  }
  while (dims.size() > graph.rank() && dims.front() == 1) {
    dims.erase(dims.begin());
  }
  return dims;
}

#if defined(__SANITIZE_THREAD__)
// OpenCV parallelises a layer over TBB's thread pool, whose synchronisation ThreadSanitizer cannot
// see (Debian's TBB is not instrumented): it reports the pool's reads of a batch's input as racing
// with the instance thread that allocated or frees it. In a ThreadSanitizer build, OpenCV runs
// every layer on the calling thread (the instance's), so what TSan checks is servekit's own
// threads. Other builds keep OpenCV's threads.
inline const bool opencv_on_the_calling_thread = [] {
  cv::setNumThreads(1);
  return true;
}();
#endif

/// A network from the model's bytes, on OpenCV's own CPU backend.
[[nodiscard]] inline cv::dnn::Net import_net(const std::string& bytes, const std::string& file) {
  try {
    cv::dnn::Net net = cv::dnn::readNetFromONNX(bytes.data(), bytes.size());
    if (net.empty()) {
      throw graph_error(file + ": OpenCV's DNN module imported no layers from it");
    }
    net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
    net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
    return net;
  } catch (const cv::Exception& e) {
    throw graph_error(
        file + ": OpenCV's DNN module (OpenCV " CV_VERSION ") cannot import this graph: " + e.msg);
  }
}

} // namespace detail

/// An ONNX model served by OpenCV's DNN module. See the file comment.
class backend {
public:
  /// Once per model: the file's bytes and graph, checked against the config; every instance
  /// imports its own network from them.
  class model_state {
  public:
    explicit model_state(const model_context& context)
        : name_{context.model_name},
          file_{model_file(context.directory, context.default_model_filename).string()},
          bytes_{read_file_bytes(file_)}, graph_{signature_of(parse_model(bytes_, file_), file_)},
          batching_{context.max_batch_size > 0} {
      detail::check_against_graph(context.inputs, context.outputs, batching_, graph_, file_);
      // Imported here so that an unsupported graph fails the load, not a request; the first
      // instance takes this network rather than importing the graph a second time.
      imported_ = detail::import_net(bytes_, file_);
    }

    /// A network of its own for one instance: the one the load imported, then new imports.
    [[nodiscard]] cv::dnn::Net network_for_instance() {
      {
        const std::lock_guard lock{mutex_};
        if (imported_) {
          cv::dnn::Net net = std::move(*imported_);
          imported_.reset();
          return net;
        }
      }
      return detail::import_net(bytes_, file_);
    }

    [[nodiscard]] const std::string& model_name() const noexcept { return name_; }
    [[nodiscard]] const std::string& file() const noexcept { return file_; }
    [[nodiscard]] const std::string& bytes() const noexcept { return bytes_; }
    [[nodiscard]] const graph_signature& graph() const noexcept { return graph_; }
    [[nodiscard]] bool batching() const noexcept { return batching_; }

  private:
    std::string name_;
    std::string file_;
    std::string bytes_;
    graph_signature graph_;
    bool batching_;
    std::mutex mutex_; // instances may be built on several threads
    std::optional<cv::dnn::Net> imported_;
  };

  backend(const instance_context& context, model_state& model)
      : model_{&model}, net_{model.network_for_instance()} {
    for (const auto& t : context.inputs) {
      inputs_.push_back({t.name, t.type, t.dims});
    }
    for (const auto& t : context.outputs) {
      const tensor_config* in_graph = detail::find(model.graph().outputs, t.name);
      outputs_.push_back({t.name, t.type, in_graph != nullptr ? in_graph->dims : shape{}});
      output_names_.push_back(t.name);
    }
  }

  /// Fills in the config from the graph (see the file comment); reads the file only when the
  /// config leaves something to it.
  static void auto_complete_config(model_options& config) {
    if (!config.input.empty() && !config.output.empty() && config.max_batch_size) {
      return;
    }
    const std::string file = model_file(config.directory, config.default_model_filename).string();
    graph_signature graph;
    try {
      graph = read_graph_signature(file);
    } catch (const graph_error& e) {
      throw config_error(config_error_code::backend_error, "",
                         "model '" + config.name + "': " + e.what());
    }
    if (!config.max_batch_size) {
      config.max_batch_size = graph.batches_along_first_dim() ? default_max_batch_size : 0;
      if (*config.max_batch_size > 0 && !config.dynamic_batching && !config.sequence_batching) {
        config.dynamic_batching.emplace();
      }
    }
    const bool batching = *config.max_batch_size > 0;
    const auto as_config = [&](const std::vector<tensor_config>& from) {
      std::vector<tensor_config> out;
      for (const auto& t : from) {
        tensor_config c = t;
        if (batching && c.dims.rank() > 0) {
          c.dims = detail::without_batch_dim(c.dims);
        }
        out.push_back(std::move(c));
      }
      return out;
    };
    if (config.input.empty()) {
      config.input = as_config(graph.inputs);
    }
    if (config.output.empty()) {
      config.output = as_config(graph.outputs);
    }
  }

  void execute(batch& b) {
    try {
      run(b);
    } catch (const cv::Exception& e) {
      throw std::runtime_error("model '" + model_->model_name() +
                               "': OpenCV's DNN module failed: " + e.msg);
    }
  }

private:
  struct io {
    std::string name;
    data_type type;
    shape graph_dims; ///< as the graph declares them (-1: any), batch dimension included
  };

  void run(batch& b) {
    // Without batching every request is a forward pass of its own.
    if (!model_->batching()) {
      for (std::size_t i = 0; i < b.size(); ++i) {
        forward(b, i, i + 1);
      }
      return;
    }
    forward(b, 0, b.size());
  }

  /// One forward pass over requests [first, last) of `b`, their rows concatenated.
  void forward(batch& b, std::size_t first, std::size_t last) {
    std::vector<std::int64_t> rows(last - first, 1);
    std::vector<cv::Mat> keep; // the input matrices live until forward() returns
    for (const auto& input : inputs_) {
      const tensor* t0 = b.request(first).find_input(input.name);
      if (t0 == nullptr) {
        throw std::invalid_argument("model '" + model_->model_name() + "': input '" + input.name +
                                    "' is missing");
      }
      std::vector<int> sizes;
      for (const auto d : t0->shape) {
        sizes.push_back(static_cast<int>(d));
      }
      for (std::size_t i = first; i < last; ++i) {
        const tensor* t = b.request(i).find_input(input.name);
        if (t == nullptr) {
          throw std::invalid_argument("model '" + model_->model_name() + "': input '" + input.name +
                                      "' is missing from request " + std::to_string(i) +
                                      " of the batch");
        }
        rows[i - first] = model_->batching() && t->shape.rank() > 0 ? t->shape[0] : 1;
      }
      if (model_->batching() && !sizes.empty()) {
        sizes[0] = 0;
        for (const auto r : rows) {
          sizes[0] += static_cast<int>(r);
        }
      }
      if (sizes.empty()) {
        sizes.push_back(1); // a scalar: OpenCV has no rank-0 matrices
      }
      cv::Mat mat;
      if (last - first == 1 && detail::passes_unconverted(input.type)) {
        // One request of FP32: the network reads the request's own buffer.
        const tensor* t = b.request(first).find_input(input.name);
        mat = cv::Mat{static_cast<int>(sizes.size()), sizes.data(), CV_32F,
                      const_cast<std::byte*>(t->data.data())};
      } else {
        mat = cv::Mat{static_cast<int>(sizes.size()), sizes.data(), CV_32F};
        float* dst = mat.ptr<float>();
        for (std::size_t i = first; i < last; ++i) {
          const tensor* t = b.request(i).find_input(input.name);
          const auto n = static_cast<std::size_t>(t->element_count());
          detail::to_float(input.type, t->data.data(), dst, n);
          dst += n;
        }
      }
      net_.setInput(mat, input.name);
      keep.push_back(std::move(mat));
    }

    std::vector<cv::Mat> results;
    net_.forward(results, output_names_);

    for (std::size_t k = 0; k < outputs_.size(); ++k) {
      const cv::Mat& mat = results[k];
      const auto total = static_cast<std::size_t>(mat.total());
      const std::vector<std::int64_t> dims =
          detail::output_dims(mat, outputs_[k].graph_dims, total);
      std::int64_t all_rows = 0;
      for (const auto r : rows) {
        all_rows += r;
      }
      if (model_->batching() && (dims.empty() || dims[0] != all_rows)) {
        throw std::runtime_error("model '" + model_->model_name() + "': output '" +
                                 outputs_[k].name + "' has " +
                                 std::to_string(dims.empty() ? 0 : dims[0]) +
                                 " rows for a batch of " + std::to_string(all_rows));
      }
      std::size_t offset = 0;
      for (std::size_t i = first; i < last; ++i) {
        const std::int64_t r = rows[i - first];
        std::vector<std::int64_t> own = dims;
        if (model_->batching()) {
          own[0] = r;
        }
        const std::size_t count = model_->batching() ? total / static_cast<std::size_t>(all_rows) *
                                                           static_cast<std::size_t>(r)
                                                     : total;
        if (!b.request(i).wants_output(outputs_[k].name)) {
          offset += count;
          continue;
        }
        tensor out;
        out.name = outputs_[k].name;
        out.type = outputs_[k].type;
        const auto s = shape::from(own);
        if (!s) {
          throw std::runtime_error("model '" + model_->model_name() + "': output '" + out.name +
                                   "' has rank " + std::to_string(own.size()));
        }
        out.shape = *s;
        out.data = buffer::allocate(count * byte_size(out.type));
        detail::from_mat(mat, offset, count, out.type, out.data.data());
        offset += count;
        b.response(i).outputs.push_back(std::move(out));
      }
    }
  }

  model_state* model_;
  cv::dnn::Net net_;
  std::vector<io> inputs_;
  std::vector<io> outputs_;
  std::vector<cv::String> output_names_;
};

} // namespace servekit::onnx
