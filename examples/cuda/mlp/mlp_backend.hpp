#pragma once
/// \file
/// Backend `gpu_mlp`: a real batched MLP, INPUT0 FP32 [layers.front()] -> OUTPUT0 FP32
/// [layers.back()], dense layers with bias, ReLU after every layer but the last, weights from a
/// seed (mlp_weights.hpp). Parameters: mlp_options.hpp. The config must declare INPUT0 and
/// OUTPUT0 with the widths `layers` gives, and sets max_batch_size.
///
/// One class, two paths, chosen per instance by where servekit placed it:
/// - GPU instance (instance_context::kind == gpu): cuBLAS GEMMs and small kernels on the
///   instance's own stream, FP32 or FP16, optionally as CUDA graphs (mlp_device.hpp);
/// - CPU instance: the same model in float32 on the host (mlp_host.hpp).
///
/// The header compiles with or without CUDA. Built with servekit::cuda (which defines
/// SERVEKIT_HAS_CUDA) and linked with the kernels of mlp_kernels.cu, it has both paths and
/// reports the visible GPUs through `device_count()`, so KIND_AUTO puts its instances on every
/// GPU, or on the CPU when there is none. Built without, it has the CPU path only.

#include "mlp_host.hpp"
#include "mlp_options.hpp"
#include "mlp_weights.hpp"

#include <servekit/backend/backend.hpp>
#include <servekit/backend/batch_io.hpp>
#include <servekit/core/status.hpp>

#if defined(SERVEKIT_HAS_CUDA)
#include "mlp_device.hpp"

#include <servekit/cuda/device.hpp>

#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cuda_examples {

class mlp_backend {
public:
  // The widths are a run-time parameter, so the declarations leave the dims open; the
  // constructor holds the config's dims to `layers`, and the request validator then holds
  // every request to the config.
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT0", servekit::data_type::fp32, {-1}},
  };
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUTPUT0", servekit::data_type::fp32, {-1}},
  };

  /// The GPUs this build can use: KIND_AUTO places one instance group per visible GPU, or runs
  /// on the CPU when this is 0 (always 0 in a build without CUDA).
  [[nodiscard]] static int device_count() noexcept {
#if defined(SERVEKIT_HAS_CUDA)
    return servekit::cuda::device_count();
#else
    return 0;
#endif
  }

  /// Parses the parameters, checks the config's tensors against `layers`, builds the weights
  /// and the instance's path. Throws std::invalid_argument for a bad config (the model then
  /// fails to load, naming the instance and this message) and cuda_error on a GPU failure.
  explicit mlp_backend(const servekit::instance_context& context)
      : options_{parse_mlp_options(context)} {
    check_tensor(context.inputs, "input", "INPUT0", options_.input_width(), "first");
    check_tensor(context.outputs, "output", "OUTPUT0", options_.output_width(), "last");
    // Without batching (max_batch_size 0) each request is one row.
    const std::int64_t max_rows = std::max<std::int64_t>(context.max_batch_size, 1);
    mlp_weights weights = make_mlp_weights(options_.layers, options_.seed);
    if (context.kind == servekit::instance_kind::gpu) {
#if defined(SERVEKIT_HAS_CUDA)
      device_ = std::make_unique<mlp_device_runner>(weights, options_, context.device_id, max_rows);
      return;
#else
      throw std::invalid_argument("instance placed on GPU " + std::to_string(context.device_id) +
                                  " but this build of the mlp backend has no CUDA; use "
                                  "KIND_CPU or KIND_AUTO");
#endif
    }
    host_.emplace(std::move(weights), max_rows);
    input_.resize(static_cast<std::size_t>(max_rows * options_.input_width()));
    output_.resize(static_cast<std::size_t>(max_rows * options_.output_width()));
  }

  /// Runs one batch on this instance's path. A failure fails every request of the batch with
  /// its status (naming the failed call) and leaves the instance ready for the next one.
  void execute(servekit::batch& b) {
#if defined(SERVEKIT_HAS_CUDA)
    if (device_) {
      fail_all(b, device_->execute(b));
      return;
    }
#endif
    fail_all(b, execute_on_host(b));
  }

  [[nodiscard]] const mlp_options& options() const noexcept { return options_; }
  [[nodiscard]] bool on_gpu() const noexcept {
#if defined(SERVEKIT_HAS_CUDA)
    return device_ != nullptr;
#else
    return false;
#endif
  }

#if defined(SERVEKIT_HAS_CUDA)
  /// execute() with hooks around the GPU work (see gpu_observer); a CPU instance ignores them.
  template <gpu_observer Observer>
  void execute(servekit::batch& b, Observer&& observer) {
    if (device_) {
      fail_all(b, device_->execute(b, std::forward<Observer>(observer)));
      return;
    }
    fail_all(b, execute_on_host(b));
  }

  /// The instance's stream (GPU instances only), e.g. to record timing events on.
  [[nodiscard]] cudaStream_t stream() const noexcept {
    SERVEKIT_ASSERT(device_ != nullptr, "mlp_backend::stream() on a CPU instance");
    return device_->stream();
  }

  /// The GPU path (nullptr on a CPU instance): its graph cache counters, or forward() alone,
  /// for tests and benchmarks.
  [[nodiscard]] mlp_device_runner* device_runner() noexcept { return device_.get(); }
  [[nodiscard]] const mlp_device_runner* device_runner() const noexcept { return device_.get(); }
#endif

private:
  /// Holds the config's declaration of `name` to the width `layers` gives it.
  static void check_tensor(std::span<const servekit::tensor_config> declared,
                           std::string_view field, std::string_view name, std::int64_t width,
                           std::string_view which) {
    const servekit::shape expected{width};
    const auto it = std::find_if(declared.begin(), declared.end(),
                                 [&](const servekit::tensor_config& t) { return t.name == name; });
    if (it == declared.end() || it->dims != expected) {
      throw std::invalid_argument(
          std::string{field} + " '" + std::string{name} + "' must have dims " +
          servekit::to_string(expected) + " (the " + std::string{which} +
          " width of parameter 'layers'), but the config " +
          (it == declared.end() ? "does not declare it"
                                : "declares " + servekit::to_string(it->dims)));
    }
  }

  [[nodiscard]] servekit::status execute_on_host(servekit::batch& b) {
    const std::int64_t rows = b.batch_size();
    if (rows < 1 || rows > host_->max_rows()) {
      return servekit::invalid_argument("mlp: batch of " + std::to_string(rows) +
                                        " rows, the instance holds buffers for 1 to " +
                                        std::to_string(host_->max_rows()));
    }
    const auto in =
        std::span{input_}.first(static_cast<std::size_t>(rows * options_.input_width()));
    const auto out =
        std::span{output_}.first(static_cast<std::size_t>(rows * options_.output_width()));
    if (auto s = servekit::gather_input(b, "INPUT0", std::as_writable_bytes(in)); !s.ok()) {
      return s;
    }
    b.mark_compute_input_end();
    host_->forward(in, rows, out);
    b.mark_compute_output_start();
    return servekit::scatter_output(b, "OUTPUT0", servekit::data_type::fp32,
                                    servekit::shape{options_.output_width()}, std::as_bytes(out));
  }

  static void fail_all(servekit::batch& b, const servekit::status& s) {
    if (s.ok()) {
      return;
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      servekit::response& r = b.response(i);
      r.outputs.clear(); // a scatter that failed half-way may have filled some
      r.status = s;
    }
  }

  mlp_options options_;
  std::optional<mlp_host_runner> host_; ///< CPU instances
  std::vector<float> input_;            ///< CPU instances: the gathered batch
  std::vector<float> output_;           ///< CPU instances: the batched result
#if defined(SERVEKIT_HAS_CUDA)
  std::unique_ptr<mlp_device_runner> device_; ///< GPU instances
#endif
};

} // namespace cuda_examples
