#pragma once
/// \file
/// Backend `gpu_accumulate`: the accumulate sequence model (examples/server/backends/
/// accumulate.hpp) with its state on the GPU. INPUT INT32 [1] -> OUTPUT INT32 [1], the running
/// sum of INPUT over a sequence; the sum is servekit's implicit state INPUT_STATE/OUTPUT_STATE
/// (INT32 [1]).
///
/// The config must set `use_same_buffer_for_input_output: true` on that state: the backend
/// adds to INPUT_STATE in place and returns no OUTPUT_STATE, so the state store takes the
/// updated buffer back as the next state. With gpu_accumulate_state_store (the device state
/// store in a CUDA build) a GPU instance's states live in its GPU's memory for the whole
/// sequence: one small kernel updates every sequence of the batch through their state pointers,
/// and only OUTPUT (4 bytes per request) comes back to the host. A CPU instance, or a state the
/// store keeps in host memory, is updated on the host.
///
/// Compiles with or without CUDA, like mlp_backend.hpp.

#include <servekit/backend/backend.hpp>
#include <servekit/core/status.hpp>
#include <servekit/state/host_state_store.hpp>

#if defined(SERVEKIT_HAS_CUDA)
#include "accumulate_kernels.hpp"

#include <servekit/cuda/device.hpp>
#include <servekit/cuda/device_state_store.hpp>
#include <servekit/cuda/error.hpp>
#include <servekit/cuda/memory.hpp>
#include <servekit/cuda/stream.hpp>

#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cuda_examples {

/// The state store to compose gpu_accumulate with: device memory for GPU instances' slots
/// where CUDA is built in, host memory otherwise (and for CPU instances' slots either way).
#if defined(SERVEKIT_HAS_CUDA)
using gpu_accumulate_state_store = servekit::cuda::device_state_store;
#else
using gpu_accumulate_state_store = servekit::host_state_store;
#endif

class gpu_accumulate_backend {
public:
  static constexpr servekit::tensor_declaration inputs[] = {
      {"INPUT", servekit::data_type::int32, {1}},
  };
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUTPUT", servekit::data_type::int32, {1}},
  };

  /// See mlp_backend::device_count: KIND_AUTO uses every visible GPU, else the CPU.
  [[nodiscard]] static int device_count() noexcept {
#if defined(SERVEKIT_HAS_CUDA)
    return servekit::cuda::device_count();
#else
    return 0;
#endif
  }

  /// Throws cuda_error when a GPU instance cannot get its stream or buffers.
  explicit gpu_accumulate_backend(const servekit::instance_context& context)
      : model_name_{context.model_name} {
    if (context.kind == servekit::instance_kind::gpu) {
#if defined(SERVEKIT_HAS_CUDA)
      // One step per slot: a batch holds at most max_batch_size sequences.
      const auto capacity = static_cast<std::size_t>(std::max(context.max_batch_size, 1));
      device_ = std::make_unique<device_path>(context.device_id, capacity);
#else
      throw std::invalid_argument("instance placed on GPU " + std::to_string(context.device_id) +
                                  " but this build of the gpu_accumulate backend has no CUDA; "
                                  "use KIND_CPU or KIND_AUTO");
#endif
    }
  }

  void execute(servekit::batch& b) {
    if (!b.has_sequences()) {
      fail_all(b, servekit::invalid_argument(
                      "model '" + model_name_ +
                      "': the gpu_accumulate backend needs sequence_batching with implicit state"));
      return;
    }
    on_device_.clear();
    for (std::size_t i = 0; i < b.size(); ++i) {
      // A direct-strategy slot with nothing ready is padding: its response is discarded.
      if (!b.sequence(i).ready) {
        continue;
      }
      step s;
      if (servekit::status checked = read_step(b, i, s); !checked.ok()) {
        b.response(i).status = std::move(checked);
      } else if (s.state->data.location().host_accessible()) {
        add_output(b, i, accumulate_on_host(s));
      } else {
        on_device_.push_back(i);
      }
    }
    if (!on_device_.empty()) {
      execute_on_device(b);
    }
  }

private:
  /// What one request contributes.
  struct step {
    servekit::tensor* state = nullptr; ///< INPUT_STATE, INT32 [1] (host or device memory)
    std::int32_t value = 0;            ///< INPUT
    bool start = false;
  };

  [[nodiscard]] servekit::status read_step(servekit::batch& b, std::size_t i, step& s) const {
    servekit::request& r = b.request(i);
    const servekit::tensor& in = r.input("INPUT");
    s.state = r.find_input("INPUT_STATE");
    if (s.state == nullptr || s.state->type != servekit::data_type::int32 ||
        s.state->element_count() != 1 || s.state->data.size() != sizeof(std::int32_t)) {
      return servekit::invalid_argument(
          "model '" + model_name_ +
          "': the gpu_accumulate backend needs the implicit state INPUT_STATE/OUTPUT_STATE, "
          "TYPE_INT32 dims [1], with use_same_buffer_for_input_output, in "
          "sequence_batching.state");
    }
    if (in.element_count() != 1) {
      return servekit::invalid_argument("model '" + model_name_ +
                                        "': a sequence request carries one INPUT value, got "
                                        "shape " +
                                        servekit::to_string(in.shape));
    }
    s.value = in.values<std::int32_t>()[0];
    s.start = b.sequence(i).start;
    return servekit::ok_status();
  }

  /// The sum, wrapping like the int32 it is (unsigned addition; signed overflow is undefined).
  [[nodiscard]] static std::int32_t wrapping_add(std::int32_t a, std::int32_t b) noexcept {
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) + static_cast<std::uint32_t>(b));
  }

  /// Host state: read, add, write back in place.
  [[nodiscard]] static std::int32_t accumulate_on_host(step& s) {
    std::int32_t& state = s.state->values<std::int32_t>()[0];
    // On START the state is uninitialised as far as a portable model knows: start from 0.
    state = wrapping_add(s.start ? 0 : state, s.value);
    return state;
  }

  static void add_output(servekit::batch& b, std::size_t i, std::int32_t sum) {
    const servekit::tensor& in = b.request(i).input("INPUT");
    b.response(i)
        .add_output("OUTPUT", servekit::data_type::int32, in.shape)
        .values<std::int32_t>()[0] = sum;
  }

  static void fail_all(servekit::batch& b, const servekit::status& s) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      b.response(i).outputs.clear();
      b.response(i).status = s;
    }
  }

#if defined(SERVEKIT_HAS_CUDA)
  /// A GPU instance's stream and staging, sized for a full batch and grown if one is larger.
  class device_path {
  public:
    device_path(int device, std::size_t capacity) : device_{device}, stream_{device} {
      const servekit::cuda::device_guard on{device_}; // pinned memory too: no stray context
      reserve(capacity);
    }
    device_path(const device_path&) = delete;
    device_path& operator=(const device_path&) = delete;
    ~device_path() { static_cast<void>(stream_.synchronize()); }

    [[nodiscard]] int device() const noexcept { return device_; }

    /// Steps in, sums out: one copy each way around one kernel launch, one synchronisation.
    [[nodiscard]] servekit::status run(std::span<const kernels::accumulate_step> steps,
                                       std::span<std::int32_t> sums) {
      const servekit::cuda::device_guard on{device_};
      if (steps.size() > capacity_) {
        try {
          reserve(steps.size()); // the stream is idle between executions: safe to reallocate
        } catch (const servekit::cuda::cuda_error& e) {
          return e.error(); // out of memory fails this batch, not the instance
        }
      }
      std::memcpy(pinned_steps_.data(), steps.data(), steps.size_bytes());
      const cudaStream_t s = stream_.get();
      auto* const device_steps = reinterpret_cast<kernels::accumulate_step*>(steps_.data());
      auto* const device_sums = reinterpret_cast<std::int32_t*>(sums_.data());
      servekit::status st =
          servekit::cuda::to_status(cudaMemcpyAsync(device_steps, pinned_steps_.data(),
                                                    steps.size_bytes(), cudaMemcpyHostToDevice, s),
                                    "cudaMemcpyAsync(steps)");
      if (st.ok()) {
        st = servekit::cuda::to_status(
            kernels::launch_accumulate(device_steps, device_sums, std::ssize(steps), s),
            "launch_accumulate");
      }
      if (st.ok()) {
        st =
            servekit::cuda::to_status(cudaMemcpyAsync(pinned_sums_.data(), device_sums,
                                                      sums.size_bytes(), cudaMemcpyDeviceToHost, s),
                                      "cudaMemcpyAsync(sums)");
      }
      // Synchronise even after a failure: queued copies still use the pinned buffers. The
      // states must also be written before execute returns and the store takes them back.
      const servekit::status synced = stream_.synchronize();
      if (!st.ok()) {
        return st;
      }
      if (!synced.ok()) {
        return synced;
      }
      std::memcpy(sums.data(), pinned_sums_.data(), sums.size_bytes());
      return servekit::ok_status();
    }

  private:
    void reserve(std::size_t capacity) {
      const std::size_t step_bytes = capacity * sizeof(kernels::accumulate_step);
      const std::size_t sum_bytes = capacity * sizeof(std::int32_t);
      steps_ = servekit::cuda::allocate_device(device_, step_bytes);
      sums_ = servekit::cuda::allocate_device(device_, sum_bytes);
      pinned_steps_ = servekit::cuda::allocate_pinned(step_bytes);
      pinned_sums_ = servekit::cuda::allocate_pinned(sum_bytes);
      capacity_ = capacity;
    }

    int device_;
    servekit::cuda::stream stream_;
    std::size_t capacity_ = 0;
    servekit::buffer steps_; ///< device: kernels::accumulate_step[capacity_]
    servekit::buffer sums_;  ///< device: int32[capacity_]
    servekit::buffer pinned_steps_;
    servekit::buffer pinned_sums_;
  };

  void execute_on_device(servekit::batch& b) {
    if (!device_) {
      // A CPU instance given device state (a device store configured for another placement)
      // cannot touch it.
      for (const std::size_t i : on_device_) {
        b.response(i).status =
            servekit::invalid_argument("model '" + model_name_ +
                                       "': INPUT_STATE is in GPU memory but the instance runs on "
                                       "the CPU");
      }
      return;
    }
    steps_.clear();
    step_requests_.clear();
    for (const std::size_t i : on_device_) {
      step s;
      static_cast<void>(read_step(b, i, s)); // checked in execute()
      if (s.state->data.location().device_id != device_->device()) {
        b.response(i).status = servekit::invalid_argument(
            "model '" + model_name_ + "': INPUT_STATE is on GPU " +
            std::to_string(s.state->data.location().device_id) + " but the instance runs on GPU " +
            std::to_string(device_->device()));
        continue;
      }
      steps_.push_back(
          {reinterpret_cast<std::int32_t*>(s.state->data.data()), s.value, s.start ? 1 : 0});
      step_requests_.push_back(i);
    }
    sums_.resize(steps_.size());
    const servekit::status s = device_->run(steps_, sums_);
    for (std::size_t k = 0; k < step_requests_.size(); ++k) {
      if (s.ok()) {
        add_output(b, step_requests_[k], sums_[k]);
      } else {
        b.response(step_requests_[k]).status = s;
      }
    }
  }

  std::unique_ptr<device_path> device_;
  std::vector<kernels::accumulate_step> steps_; ///< per batch, reused
  std::vector<std::size_t> step_requests_;      ///< the request of each step
  std::vector<std::int32_t> sums_;
#else
  void execute_on_device(servekit::batch& b) {
    for (const std::size_t i : on_device_) {
      b.response(i).status = servekit::invalid_argument(
          "model '" + model_name_ + "': INPUT_STATE is in GPU memory but this build has no CUDA");
    }
  }
#endif

  std::string model_name_;
  std::vector<std::size_t> on_device_; ///< per batch: requests whose state is in device memory
};

} // namespace cuda_examples
