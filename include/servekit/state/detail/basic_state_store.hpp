#pragma once
/// \file
/// basic_state_store<Memory>: the bind/update/release flow every state store shares, over a
/// memory policy that says where a slot's state lives and how bytes get there.
///
/// Why one template: host_state_store and cuda::device_state_store follow the `state_store`
/// rules (the START rule, the lost-state rule, what a failed response or a refused output state
/// leaves, which outputs a client sees, the counters) line for line; they differ only in how an
/// initial state is made, which lent buffer may come back, and how an output state becomes the
/// slot's new state. Written twice, a fix to the rules had to be made twice. The memory policy
/// holds those three differences; the rules live here once. The template is in state/ so that
/// the host store needs nothing above it; cuda/ brings its device memory policy.

#include <servekit/core/assert.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/state/detail/state_spec.hpp>
#include <servekit/state/state_store.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace servekit::detail {

/// The state store flow of the `state_store` concept (see there for what each member does), with
/// the memory a slot's state lives in left to `Memory`, which provides:
///
/// - `explicit Memory(const state_store_config&)`: checks what this memory cannot hold (throws
///   config_error) before any data file is read, and prepares what its slots share (no
///   allocation: a store is built when a model loads, maybe on a machine without the memory).
/// - `slot_place`, `slot_place place_of(const state_store_config&, std::size_t slot)`: where a
///   slot keeps its state, stored with the slot and passed to the calls below.
/// - `status initialise(slot_place, const state_spec&, std::string_view model, buffer& out)`:
///   `out` = the spec's initial contents (zeros or the data file's bytes) in the slot's memory.
/// - `bool takes_back(slot_place, const buffer& lent)`: whether a lent buffer found in the
///   request after execution may go back to the slot as it is.
/// - `status keep(slot_place, const state_spec&, std::string_view model, tensor& output,
///   const shape& dims, bool visible, buffer& next)`: `next` = the slot's new state from an
///   output state that passed the concept's checks (its dims are `dims`); the checks only this
///   memory needs come first. The output is moved from only when `!visible`: a client that sees
///   it keeps the original.
///
/// A failure of `initialise` or `keep` is a status that names the state and the model.
template <class Memory>
class basic_state_store {
public:
  /// Reads every initial_state data file now, so that a missing or short file fails the load
  /// rather than the first request. Throws config_error.
  explicit basic_state_store(const state_store_config& config)
      : memory_{config}, model_name_{config.model_name}, batched_{config.batched},
        slots_(config.slots) {
    specs_.reserve(config.states.size());
    for (std::size_t i = 0; i < config.states.size(); ++i) {
      specs_.push_back(make_state_spec(config, i));
    }
    for (std::size_t s = 0; s < slots_.size(); ++s) {
      slots_[s].place = memory_.place_of(config, s);
      slots_[s].states.resize(specs_.size());
    }
  }

  basic_state_store(const basic_state_store&) = delete;
  basic_state_store& operator=(const basic_state_store&) = delete;

  /// Lends the slot's state to `r` as its state inputs, (re)initialising it first on `start` or
  /// when the slot holds none. A failed (re)initialisation leaves the slot's state lost, so that
  /// the sequence must restart. Call `update` (or `release`) before the next `bind` of the slot,
  /// even when the execution failed.
  [[nodiscard]] status bind(std::size_t slot, bool start, request& r) {
    SERVEKIT_ASSERT(slot < slots_.size(), "state store bind: slot out of range");
    auto& entry = slots_[slot];
    SERVEKIT_ASSERT(!entry.lent, "state store: bind twice without update");
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
        buffer next;
        if (auto s = memory_.initialise(entry.place, specs_[i], model_name_, next); !s.ok()) {
          for (auto& value : entry.states) {
            drop(value);
          }
          return s;
        }
        replace(entry.states[i], std::move(next), specs_[i].initial_dims);
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
    SERVEKIT_ASSERT(slot < slots_.size(), "state store update: slot out of range");
    auto& entry = slots_[slot];
    status result;
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      auto s = update_one(entry.place, specs_[i], entry.lent ? &entry.states[i] : nullptr, r, out);
      if (!s.ok() && result.ok()) {
        result = std::move(s);
      }
    }
    entry.lent = false;
    return result;
  }

  /// Frees the slot's state (END, idle expiry). Idempotent. A lent buffer dies with its request.
  void release(std::size_t slot) noexcept {
    SERVEKIT_ASSERT(slot < slots_.size(), "state store release: slot out of range");
    auto& entry = slots_[slot];
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

  /// Slots holding state, from their first bind until release.
  [[nodiscard]] std::size_t live_sequences() const noexcept {
    return live_.load(std::memory_order_relaxed);
  }
  /// Bytes held for live slots, lent buffers included.
  [[nodiscard]] std::size_t bytes_in_use() const noexcept {
    return bytes_.load(std::memory_order_relaxed);
  }

protected:
  [[nodiscard]] const Memory& memory() const noexcept { return memory_; }

private:
  using slot_place = typename Memory::slot_place;

  /// One state of one slot.
  struct state_value {
    buffer data;           ///< empty while lent to a request
    shape dims;            ///< without the batch dimension
    std::size_t bytes = 0; ///< counted in bytes_, lent or not
    bool held = false;     ///< false before the first bind and once lost
  };

  /// Slots are used from different threads; a cache line each keeps them from slowing each
  /// other down.
  struct alignas(64) slot_entry {
    [[no_unique_address]] slot_place place{};
    std::vector<state_value> states;
    bool live = false;
    bool lent = false;
  };

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

  /// `update` for one state; `value` is null when the slot was released while lent.
  [[nodiscard]] status update_one(slot_place place, const state_spec& spec, state_value* value,
                                  request& r, response& out) {
    const auto& options = spec.options;
    // The lent input state leaves the request, its buffer kept if the backend left it there.
    buffer lent;
    bool lent_back = false;
    const auto input = std::find_if(r.inputs.begin(), r.inputs.end(),
                                    [&](const tensor& t) { return t.name == options.input_name; });
    if (input != r.inputs.end()) {
      if (value != nullptr && input->data.size() == value->bytes &&
          memory_.takes_back(place, input->data) &&
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
      result = check_output_state(options, *output, batched_, model_name_, dims);
      buffer next;
      if (result.ok()) {
        result = memory_.keep(place, spec, model_name_, *output, dims, visible, next);
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

  /// First: it checks the config before the data files are read, and its shared resources (a
  /// device's buffer pool) outlive the slots' buffers.
  [[no_unique_address]] Memory memory_;
  std::string model_name_;
  bool batched_ = false;
  std::vector<state_spec> specs_;
  std::vector<slot_entry> slots_;
  alignas(64) std::atomic<std::size_t> live_{0};
  alignas(64) std::atomic<std::size_t> bytes_{0};
};

} // namespace servekit::detail
