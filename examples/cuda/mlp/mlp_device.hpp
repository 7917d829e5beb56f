#pragma once
/// \file
/// The MLP on a GPU: what one GPU instance of the `mlp` backend owns and does per batch. Host
/// C++ over the CUDA runtime and cuBLAS (g++ builds it); the two small kernels come from
/// mlp_kernels.cu through mlp_kernels.hpp.
///
/// Per batch, on the instance's own stream, with one synchronisation at the end:
///
///     requests --memcpy--> pinned --H2D--> input_ --GEMM, bias+ReLU per layer--> output_
///     output_ --D2H--> pinned --scatter--> one output tensor per request
///
/// The forward pass is enqueued directly or, with `cuda_graphs`, captured once per batch size
/// and replayed. Graph replays reuse the captured pointers, so every buffer the forward pass
/// touches is allocated once, at construction, for the largest batch.

#include "cublas_handle.hpp"
#include "mlp_kernels.hpp"
#include "mlp_options.hpp"
#include "mlp_weights.hpp"

#include <servekit/backend/batch.hpp>
#include <servekit/backend/batch_io.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/status.hpp>
#include <servekit/cuda/device.hpp>
#include <servekit/cuda/error.hpp>
#include <servekit/cuda/graph_cache.hpp>
#include <servekit/cuda/memory.hpp>
#include <servekit/cuda/staging.hpp>
#include <servekit/cuda/stream.hpp>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace cuda_examples {

/// Hooks around the GPU work of one execution, for profiling: `gpu_work_begins(s)` right after
/// the input copy is queued, `gpu_work_ends(s)` right after the output copy is queued, both on
/// the instance's thread before it waits for the stream. bench_gpu records CUDA events there to
/// measure how busy the GPU is (an event recorded at the first hook completes when the input
/// copy does, so a busy time measured that way leaves the copy out and errs low). A serving
/// backend observes nothing (no_gpu_observer).
template <class O>
concept gpu_observer = requires(O& o, cudaStream_t s) {
  o.gpu_work_begins(s);
  o.gpu_work_ends(s);
};

/// The observer that observes nothing (compiled away).
struct no_gpu_observer {
  void gpu_work_begins(cudaStream_t /*stream*/) noexcept {}
  void gpu_work_ends(cudaStream_t /*stream*/) noexcept {}
};

/// One GPU instance's MLP. Built on the model's loading thread, used from the instance's thread
/// (one execution at a time); every call makes its device current first.
class mlp_device_runner {
public:
  /// Uploads `weights` to `device` (converted to FP16 for mlp_precision::fp16), allocates every
  /// buffer for batches of up to `max_rows` rows (padded ones included), and runs the forward pass
  /// once so that lazy kernel loading and cuBLAS's first-call setup happen here, not inside the
  /// first graph capture or request. Throws cuda_error.
  mlp_device_runner(const mlp_weights& weights, const mlp_options& options, int device,
                    std::int64_t max_rows)
      : device_{device}, precision_{options.precision}, in_width_{weights.input_width()},
        out_width_{weights.output_width()}, stream_{device}, blas_{device, stream_.get()},
        graphs_{servekit::cuda::graph_batch_sizes{options.graph_batch_sizes,
                                                  options.pad_to_graph_batch_size},
                options.cuda_graphs} {
    const servekit::cuda::device_guard on{device_};
    max_rows_ = std::max<std::int64_t>(max_rows, 1);
    // With padding, a full batch may run at the next listed graph size: size the buffers for it.
    capacity_rows_ = std::max(max_rows_, graphs_.choose(max_rows_).run_size);
    upload(weights);
    allocate_activations(weights);
    throw_if_failed(enqueue_forward(stream_.get(), 1));
    throw_if_failed(enqueue_forward(stream_.get(), capacity_rows_));
    throw_if_failed(stream_.synchronize());
  }

  mlp_device_runner(const mlp_device_runner&) = delete;
  mlp_device_runner& operator=(const mlp_device_runner&) = delete;
  /// Waits for queued work before the buffers it uses are freed.
  ~mlp_device_runner() { static_cast<void>(stream_.synchronize()); }

  [[nodiscard]] int device() const noexcept { return device_; }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_.get(); }
  [[nodiscard]] const servekit::cuda::graph_cache& graphs() const noexcept { return graphs_; }

  /// Runs batch `b` (INPUT0 [rows, in] -> OUTPUT0 [rows, out]) and fills its responses'
  /// outputs. A failure comes back as a status for the whole batch; the stream is idle again
  /// either way, so the next batch starts clean.
  template <gpu_observer Observer = no_gpu_observer>
  [[nodiscard]] servekit::status execute(servekit::batch& b, Observer&& observer = {}) {
    const servekit::cuda::device_guard on{device_};
    const std::int64_t rows = b.batch_size();
    if (rows < 1 || rows > max_rows_) {
      return servekit::invalid_argument("mlp: batch of " + std::to_string(rows) +
                                        " rows, the instance holds buffers for 1 to " +
                                        std::to_string(max_rows_));
    }
    const std::size_t in_bytes = row_bytes(in_width_) * static_cast<std::size_t>(rows);
    const std::size_t out_bytes = row_bytes(out_width_) * static_cast<std::size_t>(rows);
    // The request validator checked every INPUT0 against the config's dims; this guards the
    // device buffer against a config that slipped past the constructor's checks.
    if (const std::size_t got = servekit::gathered_size(b, "INPUT0"); got != in_bytes) {
      return servekit::invalid_argument("mlp: INPUT0 holds " + std::to_string(got) +
                                        " bytes over the batch, expected " +
                                        std::to_string(in_bytes) + " (" + std::to_string(rows) +
                                        " rows of " + std::to_string(in_width_) + " FP32)");
    }
    const auto choice = graphs_.choose(rows);
    servekit::status s = servekit::cuda::gather_to_device(
        b, "INPUT0", pinned_in_.bytes().first(in_bytes), input_.data(), stream_.get());
    b.mark_compute_input_end();
    if (s.ok()) {
      observer.gpu_work_begins(stream_.get());
      // Padding rows (choice.run_size > rows) compute on whatever the buffers last held: every
      // row of a GEMM is independent, so they cannot disturb the real rows.
      s = forward(choice.run_size);
    }
    if (s.ok()) {
      b.record_padding(choice.padding);
      s = servekit::cuda::copy_to_host_async(output_.data(), pinned_out_.bytes().first(out_bytes),
                                             stream_.get());
      observer.gpu_work_ends(stream_.get());
    }
    // Always synchronise, failure or not: queued copies may still read pinned_in_ or write
    // pinned_out_, which the next batch reuses.
    const servekit::status synced = stream_.synchronize();
    if (!s.ok()) {
      return s;
    }
    if (!synced.ok()) {
      return synced;
    }
    b.mark_compute_output_start();
    return servekit::cuda::scatter_from_pinned(b, "OUTPUT0", servekit::data_type::fp32,
                                               servekit::shape{out_width_},
                                               pinned_out_.bytes().first(out_bytes));
  }

  /// Enqueues the forward pass of `rows` rows, input_ to output_, on the instance's stream: the
  /// graph of that size (captured on first use) or, when the cache says no graph, the kernels
  /// themselves. Does not wait. execute() calls it between its copies; benchmarks call it alone
  /// to time the pass without them (then synchronize()).
  [[nodiscard]] servekit::status forward(std::int64_t rows) {
    if (rows < 1 || rows > capacity_rows_) {
      return servekit::invalid_argument("mlp: forward pass of " + std::to_string(rows) +
                                        " rows, the instance holds buffers for 1 to " +
                                        std::to_string(capacity_rows_));
    }
    const servekit::cuda::device_guard on{device_};
    return graphs_.run(stream_.get(), rows,
                       [&](cudaStream_t s) { return enqueue_forward(s, rows); });
  }

  /// Waits for the instance's stream.
  [[nodiscard]] servekit::status synchronize() const { return stream_.synchronize(); }

private:
  /// A layer's parameters in device memory.
  struct device_layer {
    std::int64_t in = 0;
    std::int64_t out = 0;
    servekit::buffer weights; ///< [in][out], FP32 or FP16 (the precision's)
    servekit::buffer bias;    ///< [out], FP32 in both precisions (added after FP32 accumulation)
  };

  [[nodiscard]] static std::size_t row_bytes(std::int64_t width) noexcept {
    return static_cast<std::size_t>(width) * sizeof(float);
  }
  [[nodiscard]] std::size_t weight_element_bytes() const noexcept {
    return precision_ == mlp_precision::fp16 ? 2 : sizeof(float);
  }
  [[nodiscard]] servekit::buffer device_buffer(std::size_t bytes) const {
    return servekit::cuda::allocate_device(device_, bytes);
  }
  static void throw_if_failed(const servekit::status& s) {
    if (!s.ok()) {
      throw servekit::cuda::cuda_error{s};
    }
  }

  /// Copies the weights to the device, in stream order on the instance's stream (a plain
  /// cudaMemcpy runs on the legacy default stream, which a non-blocking stream does not wait
  /// for). FP16 weights are converted there, from an FP32 upload, so the host needs no
  /// half-precision type.
  void upload(const mlp_weights& weights) {
    const cudaStream_t s = stream_.get();
    for (const mlp_layer& layer : weights.layers) {
      device_layer d;
      d.in = layer.in;
      d.out = layer.out;
      const std::size_t count = layer.weights.size();
      d.weights = device_buffer(count * weight_element_bytes());
      d.bias = device_buffer(layer.bias.size() * sizeof(float));
      SERVEKIT_CUDA_THROW(cudaMemcpyAsync(d.bias.data(), layer.bias.data(), d.bias.size(),
                                          cudaMemcpyHostToDevice, s));
      if (precision_ == mlp_precision::fp32) {
        SERVEKIT_CUDA_THROW(cudaMemcpyAsync(d.weights.data(), layer.weights.data(),
                                            d.weights.size(), cudaMemcpyHostToDevice, s));
      } else {
        servekit::buffer staging = device_buffer(count * sizeof(float));
        SERVEKIT_CUDA_THROW(cudaMemcpyAsync(staging.data(), layer.weights.data(), staging.size(),
                                            cudaMemcpyHostToDevice, s));
        SERVEKIT_CUDA_THROW(kernels::launch_float_to_half(as_floats(staging), d.weights.data(),
                                                          static_cast<std::int64_t>(count), s));
        // `staging` is freed at the end of this iteration: the conversion must be done by then.
        throw_if_failed(stream_.synchronize());
      }
      layers_.push_back(std::move(d));
    }
    throw_if_failed(stream_.synchronize());
  }

  /// Input, output and hidden activations for capacity_rows_ rows, zeroed so that padding rows
  /// start as finite numbers, plus the pinned staging buffers.
  void allocate_activations(const mlp_weights& weights) {
    std::int64_t widest_hidden = 1;
    std::int64_t widest_input = 1;
    for (std::size_t l = 0; l < weights.layers.size(); ++l) {
      widest_input = std::max(widest_input, weights.layers[l].in);
      if (l + 1 < weights.layers.size()) {
        widest_hidden = std::max(widest_hidden, weights.layers[l].out);
      }
    }
    const auto rows = static_cast<std::size_t>(capacity_rows_);
    input_ = device_buffer(rows * row_bytes(in_width_));
    output_ = device_buffer(rows * row_bytes(out_width_));
    // FP32: the hidden layers' outputs, ping-pong. FP16: the FP32 GEMM result of a hidden layer
    // (before bias+ReLU) in hidden_[0], and every layer's FP16 input, ping-pong, in half_.
    hidden_[0] = device_buffer(rows * row_bytes(widest_hidden));
    if (precision_ == mlp_precision::fp32) {
      hidden_[1] = device_buffer(rows * row_bytes(widest_hidden));
    } else {
      half_[0] = device_buffer(rows * static_cast<std::size_t>(widest_input) * 2);
      half_[1] = device_buffer(rows * static_cast<std::size_t>(widest_input) * 2);
    }
    for (servekit::buffer* d :
         {&input_, &output_, &hidden_[0], &hidden_[1], &half_[0], &half_[1]}) {
      if (!d->empty()) {
        SERVEKIT_CUDA_THROW(cudaMemsetAsync(d->data(), 0, d->size(), stream_.get()));
      }
    }
    pinned_in_ = servekit::cuda::allocate_pinned(input_.size());
    pinned_out_ = servekit::cuda::allocate_pinned(output_.size());
  }

  [[nodiscard]] static float* as_floats(servekit::buffer& b) noexcept {
    return reinterpret_cast<float*>(b.data());
  }
  [[nodiscard]] static const float* as_floats(const servekit::buffer& b) noexcept {
    return reinterpret_cast<const float*>(b.data());
  }

  /// C (out x rows, column-major) = A (out x in) * B (in x rows): in row-major terms
  /// y[rows][out] = x[rows][in] x W[in][out]. cuBLAS is column-major, and a row-major matrix is
  /// its transpose in column-major, so the row-major product needs no transpose flags: W is
  /// read as W^T (lda = out), x as x^T (ldb = in), y written as y^T (ldc = out).
  [[nodiscard]] servekit::status gemm(const device_layer& layer, const void* x, float* y,
                                      std::int64_t rows) const {
    const float one = 1.0F;
    const float zero = 0.0F;
    const cudaDataType ab_type = precision_ == mlp_precision::fp16 ? CUDA_R_16F : CUDA_R_32F;
    const int m = static_cast<int>(layer.out);
    const int n = static_cast<int>(rows);
    const int k = static_cast<int>(layer.in);
    // CUBLAS_COMPUTE_32F: FP32 accumulation in both precisions (FP16 inputs still run on tensor
    // cores); it also keeps FP32 out of TF32, which would miss the 1e-3 accuracy goal.
    return to_status(cublasGemmEx(blas_.get(), CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one,
                                  layer.weights.data(), ab_type, m, x, ab_type, k, &zero, y,
                                  CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx");
  }

  /// Enqueues the forward pass of `rows` rows from input_ to output_ on `s`: only asynchronous
  /// work on fixed buffers, so it can be captured into a graph.
  [[nodiscard]] servekit::status enqueue_forward(cudaStream_t s, std::int64_t rows) {
    const std::size_t last = layers_.size() - 1;
    if (precision_ == mlp_precision::fp32) {
      const float* x = as_floats(input_);
      for (std::size_t l = 0; l <= last; ++l) {
        const device_layer& layer = layers_[l];
        float* const y = l == last ? as_floats(output_) : as_floats(hidden_[l % 2]);
        if (auto st = gemm(layer, x, y, rows); !st.ok()) {
          return st;
        }
        SERVEKIT_CUDA_RETURN(kernels::launch_bias_activation(y, as_floats(layer.bias), rows,
                                                             layer.out, l != last, s));
        x = y;
      }
      return servekit::ok_status();
    }
    SERVEKIT_CUDA_RETURN(
        kernels::launch_float_to_half(as_floats(input_), half_[0].data(), rows * in_width_, s));
    for (std::size_t l = 0; l <= last; ++l) {
      const device_layer& layer = layers_[l];
      float* const y = l == last ? as_floats(output_) : as_floats(hidden_[0]);
      if (auto st = gemm(layer, half_[l % 2].data(), y, rows); !st.ok()) {
        return st;
      }
      const float* const bias = as_floats(layer.bias);
      if (l == last) {
        SERVEKIT_CUDA_RETURN(
            kernels::launch_bias_activation(y, bias, rows, layer.out, /*relu=*/false, s));
      } else {
        SERVEKIT_CUDA_RETURN(kernels::launch_bias_activation_to_half(
            y, bias, half_[(l + 1) % 2].data(), rows, layer.out, /*relu=*/true, s));
      }
    }
    return servekit::ok_status();
  }

  int device_;
  mlp_precision precision_;
  std::int64_t in_width_;
  std::int64_t out_width_;
  std::int64_t max_rows_ = 1;      ///< the largest batch (the model's max_batch_size, or 1)
  std::int64_t capacity_rows_ = 1; ///< rows the buffers hold: max_rows_ or its padded size
  servekit::cuda::stream stream_;
  cublas_handle blas_;
  servekit::cuda::graph_cache graphs_;
  std::vector<device_layer> layers_;
  servekit::buffer input_;     ///< FP32 [max_rows][in]: where the batch is gathered
  servekit::buffer output_;    ///< FP32 [max_rows][out]
  servekit::buffer hidden_[2]; ///< FP32 hidden activations (see allocate_activations)
  servekit::buffer half_[2];   ///< FP16 layer inputs (FP16 precision only)
  servekit::buffer pinned_in_;
  servekit::buffer pinned_out_;
};

} // namespace cuda_examples
