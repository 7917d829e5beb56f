#pragma once
/// \file
/// device_state_store: implicit sequence state kept in the memory of the GPU its instance runs on.

#include <servekit/core/assert.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/cuda/buffer_pool.hpp>
#include <servekit/cuda/device.hpp>
#include <servekit/cuda/error.hpp>
#include <servekit/cuda/memory.hpp>
#include <servekit/state/detail/basic_state_store.hpp>
#include <servekit/state/detail/state_spec.hpp>
#include <servekit/state/host_state_store.hpp>
#include <servekit/state/state_store.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit::cuda {

namespace detail {

/// basic_state_store's memory policy for a model with instances on GPUs: a GPU slot's state is
/// a buffer from the pool of the slot's GPU; a CPU slot's is host_state_memory's, as in
/// host_state_store.
class device_state_memory {
public:
  /// The pool of the slot's GPU; null: a CPU slot, served by host_state_memory.
  using slot_place = device_pool*;

  /// Checks what only this store refuses, then makes one pool per GPU with slots (which calls no
  /// CUDA API). The host checks (data files) follow when the store reads them.
  explicit device_state_memory(const state_store_config& config) {
    validate(config);
    SERVEKIT_ASSERT(config.slot_locations.empty() || config.slot_locations.size() == config.slots,
                    "device_state_store: slot_locations needs one entry per slot");
    for (const auto where : config.slot_locations) {
      if (where.kind == memory_kind::gpu) {
        pool_for(where.device_id);
      }
    }
  }

  [[nodiscard]] slot_place place_of(const state_store_config& config, std::size_t slot) const {
    if (slot >= config.slot_locations.size() ||
        config.slot_locations[slot].kind != memory_kind::gpu) {
      return nullptr;
    }
    return pool_of(config.slot_locations[slot].device_id);
  }

  /// Zeros (cudaMemset) or the data file's bytes, uploaded, on the pool's device.
  [[nodiscard]] static status initialise(slot_place pool, const servekit::detail::state_spec& spec,
                                         std::string_view model, buffer& out) {
    if (pool == nullptr) {
      return host::initialise({}, spec, model, out);
    }
    const auto s = fill(*pool, spec.from_file ? spec.initial_bytes.data() : nullptr,
                        spec.from_file ? spec.initial_bytes.size()
                                       : servekit::detail::zero_state_byte_size(
                                             spec.options.data_type, spec.initial_dims),
                        out);
    if (!s.ok()) {
      return about(spec.options.input_name, model,
                   "initialised on GPU " + std::to_string(pool->location().device_id), s);
    }
    return ok_status();
  }

  /// Only a buffer on the slot's GPU goes back as it is.
  [[nodiscard]] static bool takes_back(slot_place pool, const buffer& lent) noexcept {
    return pool == nullptr || lent.location() == pool->location();
  }

  /// An output state on the slot's GPU that the client does not see is taken as is (the common
  /// case: no copy); any other is copied into a buffer on the slot's GPU.
  [[nodiscard]] static status keep(slot_place pool, const servekit::detail::state_spec& spec,
                                   std::string_view model, tensor& output, const shape& dims,
                                   bool visible, buffer& next) {
    if (pool == nullptr) {
      return host::keep({}, spec, model, output, dims, visible, next);
    }
    const memory_location device = pool->location();
    if (output.data.location() == device && !visible) {
      next = std::move(output.data);
      return ok_status();
    }
    if (auto s = fill(*pool, output.data.data(), output.data.size(), next); !s.ok()) {
      return about(spec.options.output_name, model,
                   "kept on GPU " + std::to_string(device.device_id), s);
    }
    return ok_status();
  }

  /// What the pool of device `device` has done (all zero for a device no slot uses).
  [[nodiscard]] pool_counters counters(int device) const {
    const auto* pool = pool_of(device);
    return pool == nullptr ? pool_counters{} : pool->counters();
  }

private:
  using host = servekit::detail::host_state_memory;

  /// Throws config_error for growable state, and for TYPE_STRING state when a slot is on a GPU.
  static void validate(const state_store_config& config) {
    const bool any_gpu =
        std::any_of(config.slot_locations.begin(), config.slot_locations.end(),
                    [](memory_location where) { return where.kind == memory_kind::gpu; });
    for (std::size_t i = 0; i < config.states.size(); ++i) {
      const auto& options = config.states[i];
      const auto at = "/sequence_batching/state/" + std::to_string(i);
      const auto state = "state '" + options.input_name + "' of model '" + config.model_name + "'";
      if (options.use_growable_memory) {
        throw config_error(config_error_code::bad_value, at + "/use_growable_memory",
                           state + " asks for growable memory, which device_state_store does not "
                                   "offer (a state buffer that grows in place)");
      }
      if (any_gpu && options.data_type == data_type::bytes) {
        throw config_error(config_error_code::bad_value, at + "/data_type",
                           state +
                               " is TYPE_STRING, which cannot live in GPU memory (its "
                               "elements are length-prefixed host data), and model '" +
                               config.model_name + "' has instances on a GPU");
      }
    }
  }

  /// The pool of `device`, made on first use. Making one calls no CUDA API.
  device_pool& pool_for(int device) {
    if (auto* pool = pool_of(device)) {
      return *pool;
    }
    return *pools_.emplace_back(std::make_unique<device_pool>(device_allocator{device}));
  }

  [[nodiscard]] device_pool* pool_of(int device) const {
    const auto it = std::find_if(pools_.begin(), pools_.end(), [&](const auto& pool) {
      return pool->location().device_id == device;
    });
    return it == pools_.end() ? nullptr : it->get();
  }

  /// `s` (a CUDA failure) with the state and the model named first, as in every message of
  /// the store.
  [[nodiscard]] static status about(const std::string& state, std::string_view model,
                                    std::string_view doing, const status& s) {
    return {s.code(), "state '" + state + "' of model '" + std::string{model} + "' could not be " +
                          std::string{doing} + ": " + s.message()};
  }

  /// The calling thread's per-thread default stream on the current device. CUDA spells it
  /// `cudaStreamPerThread`, a macro with a C-style cast that -Wold-style-cast flags wherever the
  /// CUDA headers are not system headers; the warning is silenced here, once.
  [[nodiscard]] static cudaStream_t per_thread_stream() noexcept {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
    return cudaStreamPerThread;
#pragma GCC diagnostic pop
  }

  /// A buffer of `size` bytes from `pool`, holding a copy of `source` (host memory or any
  /// GPU's: unified addressing tells cudaMemcpyDefault which), or zeros when `source` is null.
  /// The bytes are in place on return (see the class comment on streams).
  [[nodiscard]] static status fill(device_pool& pool, const std::byte* source, std::size_t size,
                                   buffer& out) {
    try {
      buffer next = pool.acquire(size);
      if (size != 0) {
        const device_guard on{pool.location().device_id};
        const cudaStream_t stream = per_thread_stream();
        if (source == nullptr) {
          SERVEKIT_CUDA_RETURN(cudaMemsetAsync(next.data(), 0, size, stream));
        } else {
          SERVEKIT_CUDA_RETURN(
              cudaMemcpyAsync(next.data(), source, size, cudaMemcpyDefault, stream));
        }
        SERVEKIT_CUDA_RETURN(cudaStreamSynchronize(stream));
      }
      out = std::move(next);
      return ok_status();
    } catch (const cuda_error& e) {
      return e.error();
    } catch (const std::bad_alloc&) {
      return resource_exhausted("out of memory for a buffer of " + std::to_string(size) + " bytes");
    }
  }

  /// One per GPU with slots; the store's slots, and their buffers, die first.
  std::vector<std::unique_ptr<device_pool>> pools_;
};

} // namespace detail

/// The state store for models with instances on GPUs (see the `state_store` concept for what
/// each member does; the semantics and messages are host_state_store's).
///
/// A slot whose `state_store_config::slot_locations` entry is `gpu(d)` keeps its state in device
/// memory on d for the whole sequence: `bind` moves the slot's device buffer into the request
/// (a tensor whose location is gpu(d)) and `update` takes the output state back, so a sequence
/// step copies nothing when the backend leaves its output state on d and the client does not see
/// it. An output state the client sees is copied device to device (the client keeps the
/// original); one in host memory, or on another GPU, is copied into a buffer on d. Initial state
/// is zero-filled on the device (cudaMemset) or uploaded from the data file's bytes, read once at
/// construction. Device buffers come from one device_pool per GPU, so after warm-up a steady
/// load of sequences allocates nothing: a released state goes back to its pool.
///
/// Slots on the CPU (every slot when `slot_locations` is empty) keep their state in host memory,
/// exactly as host_state_store keeps it: both stores are detail::basic_state_store, the one
/// flow of the `state_store` rules, over a memory policy, and this store's policy serves a CPU
/// slot with host_state_store's.
///
/// CUDA work: the store does not know the instance's stream, so it fills and copies on the
/// calling thread's per-thread default stream and waits for it before returning; the backend's
/// stream may use the state at once. In turn, a backend must have finished writing the output
/// state (and reading the input state) when `execute` returns, as for every tensor it hands back.
/// CUDA failures come back as statuses that name the state, the model and the CUDA call.
///
/// Output states taken as is keep their own release function: memory a backend allocated from a
/// pool of its own must outlive the sequence (sequence_shell ends every sequence before it
/// destroys the instances).
///
/// TYPE_STRING state cannot live on a GPU (its elements are length-prefixed host data): a config
/// with such a state and any GPU slot is refused at construction. Growable memory is refused too.
class device_state_store : public servekit::detail::basic_state_store<detail::device_state_memory> {
public:
  using policy_role = state_store_role;
  static constexpr bool supports_growable_memory = false;

  /// Reads every initial_state data file now. Touches no CUDA API (so a model whose instances
  /// are all on the CPU needs no driver); device memory is allocated at the first bind of a GPU
  /// slot. Throws config_error.
  using basic_state_store::basic_state_store;

  /// What the pool of device `device` has done (all zero for a device no slot uses): after
  /// warm-up, `allocations` stays put while sequences come and go.
  [[nodiscard]] pool_counters device_pool_counters(int device) const {
    return memory().counters(device);
  }
};

static_assert(state_store<device_state_store>);

} // namespace servekit::cuda
