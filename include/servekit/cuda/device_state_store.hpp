#pragma once
/// \file
/// device_state_store: implicit sequence state kept in the memory of the GPU its instance runs on.

#include <servekit/core/assert.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/cuda/buffer_pool.hpp>
#include <servekit/cuda/device.hpp>
#include <servekit/cuda/error.hpp>
#include <servekit/cuda/memory.hpp>
#include <servekit/state/host_state_store.hpp>
#include <servekit/state/state_options.hpp>
#include <servekit/state/state_store.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit::cuda {

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
/// Slots on the CPU (every slot when `slot_locations` is empty) are served by an inner
/// host_state_store built from the same config, exactly as that store serves them.
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
class device_state_store {
public:
  using policy_role = state_store_role;
  static constexpr bool supports_growable_memory = false;

  /// Reads every initial_state data file now. Touches no CUDA API (so a model whose instances
  /// are all on the CPU needs no driver); device memory is allocated at the first bind of a GPU
  /// slot. Throws config_error.
  explicit device_state_store(const state_store_config& config)
      : host_{validated(config)}, model_name_{config.model_name}, batched_{config.batched},
        slots_(config.slots) {
    SERVEKIT_ASSERT(config.slot_locations.empty() || config.slot_locations.size() == config.slots,
                    "device_state_store: slot_locations needs one entry per slot");
    for (std::size_t s = 0; s < config.slot_locations.size(); ++s) {
      if (config.slot_locations[s].kind == memory_kind::gpu) {
        slots_[s].pool = &pool_for(config.slot_locations[s].device_id);
      }
    }
    if (!pools_.empty()) {
      specs_ = make_specs(config);
      for (auto& entry : slots_) {
        entry.states.resize(entry.pool != nullptr ? specs_.size() : 0);
      }
    }
  }

  device_state_store(const device_state_store&) = delete;
  device_state_store& operator=(const device_state_store&) = delete;

  /// Lends the slot's state to `r` as its state inputs, (re)initialising it first on `start` or
  /// when the slot holds none. On a GPU slot a failed (re)initialisation leaves the slot's state
  /// lost, so that the sequence must restart.
  [[nodiscard]] status bind(std::size_t slot, bool start, request& r) {
    SERVEKIT_ASSERT(slot < slots_.size(), "device_state_store::bind: slot out of range");
    auto& entry = slots_[slot];
    if (entry.pool == nullptr) {
      return host_.bind(slot, start, r);
    }
    SERVEKIT_ASSERT(!entry.lent, "device_state_store::bind twice without update");
    for (const auto& spec : specs_) {
      if (r.find_input(spec.options.input_name) != nullptr) {
        return invalid_argument("inference request to model '" + model_name_ +
                                "' provides input '" + spec.options.input_name +
                                "', which is an implicit state the sequence batcher supplies");
      }
    }
    if (entry.live && !start) {
      for (std::size_t i = 0; i < specs_.size(); ++i) {
        if (!entry.states[i].held) {
          return internal_error("state '" + specs_[i].options.input_name + "' of model '" +
                                model_name_ +
                                "' was lost by an earlier execution; the sequence must restart");
        }
      }
    }
    if (start || !entry.live) {
      if (!entry.live) {
        entry.live = true;
        live_.fetch_add(1, std::memory_order_relaxed);
      }
      for (std::size_t i = 0; i < specs_.size(); ++i) {
        if (auto s = initialise(*entry.pool, specs_[i], entry.states[i]); !s.ok()) {
          for (auto& value : entry.states) {
            drop(value);
          }
          return s;
        }
      }
    }
    r.inputs.reserve(r.inputs.size() + specs_.size());
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      auto& value = entry.states[i];
      const auto& options = specs_[i].options;
      r.inputs.push_back(tensor{options.input_name, options.data_type,
                                batched_ ? value.dims.with_batch(1) : value.dims,
                                std::move(value.data)});
    }
    entry.lent = true;
    return ok_status();
  }

  /// Takes the state back from `r` and `out` after execution. A slot released while its state
  /// was lent keeps nothing: the request and response are only cleaned.
  [[nodiscard]] status update(std::size_t slot, request& r, response& out) {
    SERVEKIT_ASSERT(slot < slots_.size(), "device_state_store::update: slot out of range");
    auto& entry = slots_[slot];
    if (entry.pool == nullptr) {
      return host_.update(slot, r, out);
    }
    status result;
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      auto s = update_one(*entry.pool, specs_[i], entry.lent ? &entry.states[i] : nullptr, r, out);
      if (!s.ok() && result.ok()) {
        result = std::move(s);
      }
    }
    entry.lent = false;
    return result;
  }

  /// Frees the slot's state (END, idle expiry); device buffers go back to their pool.
  /// Idempotent. A lent buffer dies with its request.
  void release(std::size_t slot) noexcept {
    SERVEKIT_ASSERT(slot < slots_.size(), "device_state_store::release: slot out of range");
    auto& entry = slots_[slot];
    if (entry.pool == nullptr) {
      host_.release(slot);
      return;
    }
    if (!entry.live) {
      return;
    }
    for (auto& value : entry.states) {
      drop(value);
    }
    live_.fetch_sub(1, std::memory_order_relaxed);
    entry.live = false;
    entry.lent = false;
  }

  /// Slots holding state, from their first bind until release, on the CPU and on GPUs.
  [[nodiscard]] std::size_t live_sequences() const noexcept {
    return host_.live_sequences() + live_.load(std::memory_order_relaxed);
  }
  /// Bytes held for live slots, lent buffers included, in host and in device memory.
  [[nodiscard]] std::size_t bytes_in_use() const noexcept {
    return host_.bytes_in_use() + bytes_.load(std::memory_order_relaxed);
  }
  /// What the pool of device `device` has done (all zero for a device no slot uses): after
  /// warm-up, `allocations` stays put while sequences come and go.
  [[nodiscard]] pool_counters device_pool_counters(int device) const {
    const auto it = std::find_if(pools_.begin(), pools_.end(), [&](const auto& pool) {
      return pool->location().device_id == device;
    });
    return it == pools_.end() ? pool_counters{} : (*it)->counters();
  }

private:
  /// One state of the config, with what its initialisation on a GPU needs.
  struct state_spec {
    state_options options;
    shape initial_dims;
    buffer initial_bytes;         ///< the data file's contents; empty: zero-filled
    bool declared_output = false; ///< output_name is a model output: clients may see it
  };

  /// One state of one GPU slot.
  struct state_value {
    buffer data;           ///< device memory of the slot's GPU; empty while lent to a request
    shape dims;            ///< without the batch dimension
    std::size_t bytes = 0; ///< counted in bytes_, lent or not
    bool held = false;     ///< false before the first bind and once lost
  };

  /// Slots are used from different threads; a cache line each keeps them from slowing each
  /// other down.
  struct alignas(64) slot_entry {
    device_pool* pool = nullptr; ///< the pool of the slot's GPU; null: a CPU slot (host_)
    std::vector<state_value> states;
    bool live = false;
    bool lent = false;
  };

  /// `config`, once the checks that only this store makes have passed; the inner host store
  /// makes the others (initial state files) when it is built from it.
  [[nodiscard]] static const state_store_config& validated(const state_store_config& config) {
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
    return config;
  }

  /// The pool of `device`, made on first use. Making one calls no CUDA API.
  device_pool& pool_for(int device) {
    for (const auto& pool : pools_) {
      if (pool->location().device_id == device) {
        return *pool;
      }
    }
    return *pools_.emplace_back(std::make_unique<device_pool>(device_allocator{device}));
  }

  /// The specs of the config's states. The initial contents come from a one-slot
  /// host_state_store, which owns the rules (zeros, data file, the file's checks): what its START
  /// lends is what a GPU slot starts from. Only data-file contents are kept; zeros are made on
  /// the device.
  [[nodiscard]] static std::vector<state_spec> make_specs(const state_store_config& config) {
    state_store_config one_slot = config;
    one_slot.slots = 1;
    one_slot.slot_locations.clear();
    host_state_store prototype{one_slot};
    request initial;
    [[maybe_unused]] const auto bound = prototype.bind(0, true, initial);
    SERVEKIT_ASSERT(bound.ok(), "device_state_store: the initial state could not be made");

    std::vector<state_spec> specs(config.states.size());
    for (std::size_t i = 0; i < specs.size(); ++i) {
      auto& spec = specs[i];
      spec.options = config.states[i];
      spec.initial_dims = servekit::detail::initial_state_shape(spec.options);
      spec.declared_output = std::find(config.model_outputs.begin(), config.model_outputs.end(),
                                       spec.options.output_name) != config.model_outputs.end();
      const auto& init = spec.options.initial_state;
      if (!init.empty() && !init.front().zero_data && !init.front().data_file.empty()) {
        spec.initial_bytes = std::move(initial.find_input(spec.options.input_name)->data);
      }
    }
    return specs;
  }

  /// `s` (a CUDA failure) with the state and the model named first, as in every message of
  /// the store.
  [[nodiscard]] status about(const std::string& state, std::string_view doing,
                             const status& s) const {
    return {s.code(), "state '" + state + "' of model '" + model_name_ + "' could not be " +
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

  /// Gives `value` its initial contents on the pool's device.
  [[nodiscard]] status initialise(device_pool& pool, const state_spec& spec, state_value& value) {
    const bool from_file = !spec.initial_bytes.empty();
    buffer next;
    const auto s = fill(pool, from_file ? spec.initial_bytes.data() : nullptr,
                        from_file ? spec.initial_bytes.size()
                                  : servekit::detail::zero_state_byte_size(spec.options.data_type,
                                                                           spec.initial_dims),
                        next);
    if (!s.ok()) {
      return about(spec.options.input_name,
                   "initialised on GPU " + std::to_string(pool.location().device_id), s);
    }
    replace(value, std::move(next), spec.initial_dims);
    return ok_status();
  }

  /// Stores `next` as the value, keeping bytes_ in step.
  void replace(state_value& value, buffer next, const shape& dims) {
    bytes_.fetch_add(next.size(), std::memory_order_relaxed);
    bytes_.fetch_sub(value.bytes, std::memory_order_relaxed);
    value.bytes = next.size();
    value.data = std::move(next);
    value.dims = dims;
    value.held = true;
  }

  /// Frees the value (lost until the sequence restarts), keeping bytes_ in step.
  void drop(state_value& value) noexcept {
    bytes_.fetch_sub(value.bytes, std::memory_order_relaxed);
    value = state_value{};
  }

  /// `update` for one state of a GPU slot; `value` is null when the slot was released while
  /// lent. host_state_store's update, with device memory.
  [[nodiscard]] status update_one(device_pool& pool, const state_spec& spec, state_value* value,
                                  request& r, response& out) {
    const auto& options = spec.options;
    const memory_location device = pool.location();
    // The lent input state leaves the request, its buffer kept if the backend left it there.
    buffer lent;
    bool lent_back = false;
    const auto input = std::find_if(r.inputs.begin(), r.inputs.end(),
                                    [&](const tensor& t) { return t.name == options.input_name; });
    if (input != r.inputs.end()) {
      if (value != nullptr && input->data.size() == value->bytes &&
          input->data.location() == device &&
          (value->bytes == 0 || input->data.data() != nullptr)) {
        lent = std::move(input->data);
        lent_back = true;
      }
      r.inputs.erase(input);
    }

    const bool visible = spec.declared_output && r.wants_output(options.output_name);
    auto output = std::find_if(out.outputs.begin(), out.outputs.end(),
                               [&](const tensor& t) { return t.name == options.output_name; });
    const auto strip_if_hidden = [&] {
      if (output != out.outputs.end() && !visible) {
        out.outputs.erase(output);
      }
    };
    if (value == nullptr) {
      strip_if_hidden();
      return ok_status();
    }

    status result;
    if (output != out.outputs.end() && out.ok()) {
      shape dims;
      result = servekit::detail::check_output_state(options, *output, batched_, model_name_, dims);
      buffer next;
      if (result.ok()) {
        if (output->data.location() == device && !visible) {
          next = std::move(output->data); // the common case: no copy
        } else if (auto s = fill(pool, output->data.data(), output->data.size(), next); !s.ok()) {
          result = about(options.output_name, "kept on GPU " + std::to_string(device.device_id), s);
        }
      }
      if (result.ok()) {
        replace(*value, std::move(next), dims);
        strip_if_hidden();
        return ok_status();
      }
    }
    strip_if_hidden();
    if (lent_back) {
      value->data = std::move(lent); // unchanged, or updated in place (same buffer)
      return result;
    }
    // The backend took the input state and gave no usable output state: nothing to keep.
    drop(*value);
    if (result.ok()) {
      result = internal_error("state '" + options.input_name + "' of model '" + model_name_ +
                              "' is lost: the backend moved the input state away and produced "
                              "no output state '" +
                              options.output_name + "'");
    }
    return result;
  }

  host_state_store host_; ///< the CPU slots (first: it is built from the validated config)
  std::string model_name_;
  bool batched_ = false;
  /// One per GPU with slots; before slots_, so that the buffers die before their pools.
  std::vector<std::unique_ptr<device_pool>> pools_;
  std::vector<state_spec> specs_; ///< empty unless some slot is on a GPU
  std::vector<slot_entry> slots_;
  alignas(64) std::atomic<std::size_t> live_{0};  ///< GPU slots holding state
  alignas(64) std::atomic<std::size_t> bytes_{0}; ///< device bytes held for them
};

static_assert(state_store<device_state_store>);

} // namespace servekit::cuda
