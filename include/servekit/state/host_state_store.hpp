#pragma once
/// \file
/// host_state_store: implicit sequence state kept in CPU memory, lent to requests without a copy.

#include <servekit/core/assert.hpp>
#include <servekit/core/buffer.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/state/state_options.hpp>
#include <servekit/state/state_store.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace servekit {

/// The state store for CPU memory (see the `state_store` concept for what each member does).
///
/// Each slot owns one buffer per state. `bind` moves it into the request as the state input,
/// `update` moves the output state (or the lent buffer) back: a sequence step copies no state
/// bytes, unless the client asked to see the output state. Memory is bounded by the live
/// sequences: a released slot holds nothing.
///
/// Triton offers growable state only in CUDA memory, and so does servekit: this store refuses
/// `use_growable_memory` at construction.
class host_state_store {
public:
  using policy_role = state_store_role;
  static constexpr bool supports_growable_memory = false;

  /// Reads every initial_state data file now, so that a missing or short file fails the load
  /// rather than the first request. Throws config_error.
  explicit host_state_store(const state_store_config& config)
      : model_name_{config.model_name}, batched_{config.batched}, slots_(config.slots) {
    specs_.reserve(config.states.size());
    for (std::size_t i = 0; i < config.states.size(); ++i) {
      specs_.push_back(make_spec(config, i));
    }
    for (auto& entry : slots_) {
      entry.states.resize(specs_.size());
    }
  }

  /// Lends the slot's state to `r` as its state inputs, (re)initialising it first on `start` or
  /// when the slot holds none. Call `update` (or `release`) before the next `bind` of the slot,
  /// even when the execution failed.
  [[nodiscard]] status bind(std::size_t slot, bool start, request& r) {
    SERVEKIT_ASSERT(slot < slots_.size(), "host_state_store::bind: slot out of range");
    auto& entry = slots_[slot];
    SERVEKIT_ASSERT(!entry.lent, "host_state_store::bind twice without update");
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
      for (std::size_t i = 0; i < specs_.size(); ++i) {
        initialise(specs_[i], entry.states[i]);
      }
      if (!entry.live) {
        entry.live = true;
        live_.fetch_add(1, std::memory_order_relaxed);
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
    SERVEKIT_ASSERT(slot < slots_.size(), "host_state_store::update: slot out of range");
    auto& entry = slots_[slot];
    status result;
    for (std::size_t i = 0; i < specs_.size(); ++i) {
      auto s = update_one(specs_[i], entry.lent ? &entry.states[i] : nullptr, r, out);
      if (!s.ok() && result.ok()) {
        result = std::move(s);
      }
    }
    entry.lent = false;
    return result;
  }

  /// Frees the slot's state (END, idle expiry). Idempotent. A lent buffer dies with its request.
  void release(std::size_t slot) noexcept {
    SERVEKIT_ASSERT(slot < slots_.size(), "host_state_store::release: slot out of range");
    auto& entry = slots_[slot];
    if (!entry.live) {
      return;
    }
    std::size_t freed = 0;
    for (auto& value : entry.states) {
      freed += value.bytes;
      value = state_value{};
    }
    bytes_.fetch_sub(freed, std::memory_order_relaxed);
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

private:
  /// One state of the config, with what its initialisation needs.
  struct state_spec {
    state_options options;
    shape initial_dims;
    bool from_file = false;
    buffer initial_bytes;         ///< the data file's contents (from_file only)
    bool declared_output = false; ///< output_name is a model output: clients may see it
  };

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
    std::vector<state_value> states;
    bool live = false;
    bool lent = false;
  };

  [[nodiscard]] static state_spec make_spec(const state_store_config& config, std::size_t index) {
    const auto& options = config.states[index];
    const auto at = "/sequence_batching/state/" + std::to_string(index);
    if (options.use_growable_memory) {
      throw config_error(config_error_code::bad_value, at + "/use_growable_memory",
                         "state '" + options.input_name + "' of model '" + config.model_name +
                             "' asks for growable memory, which needs a device state store "
                             "(as in Triton, where growable state is CUDA memory only); "
                             "host_state_store keeps fixed-size state in CPU memory");
    }
    state_spec spec;
    spec.options = options;
    spec.initial_dims = detail::initial_state_shape(options);
    spec.declared_output = std::find(config.model_outputs.begin(), config.model_outputs.end(),
                                     options.output_name) != config.model_outputs.end();
    if (!options.initial_state.empty() && !options.initial_state.front().zero_data &&
        !options.initial_state.front().data_file.empty()) {
      spec.from_file = true;
      spec.initial_bytes = read_initial_state(config, index, spec.initial_dims);
    }
    return spec;
  }

  /// The contents of `<model_directory>/initial_state/<data_file>`, checked against the
  /// initial dims.
  [[nodiscard]] static buffer read_initial_state(const state_store_config& config,
                                                 std::size_t index, const shape& dims) {
    const auto& initial = config.states[index].initial_state.front();
    const auto at =
        "/sequence_batching/state/" + std::to_string(index) + "/initial_state/0/data_file";
    std::filesystem::path file =
        std::filesystem::path{config.model_directory} / "initial_state" / initial.data_file;
    std::error_code ec;
    const auto absolute = std::filesystem::absolute(file, ec);
    const std::string shown = ec ? file.string() : absolute.lexically_normal().string();
    const auto type = config.states[index].initial_state.front().data_type;
    const auto elements = static_cast<std::size_t>(dims.element_count());
    const auto expected = elements * byte_size(type);
    const auto needs = [&] {
      return type == data_type::bytes
                 ? std::to_string(elements) + " length-prefixed TYPE_STRING elements for dims " +
                       to_string(dims)
                 : std::to_string(expected) + " bytes (" + std::to_string(elements) + " x " +
                       std::string{to_config_string(type)} + " for dims " + to_string(dims) + ")";
    };
    if (!std::filesystem::is_regular_file(file, ec)) {
      throw config_error(config_error_code::bad_value, at,
                         "initial state file '" + shown + "' of model '" + config.model_name +
                             "' does not exist or is not a file; it must hold " + needs());
    }
    const auto size = std::filesystem::file_size(file, ec);
    if (ec) {
      throw config_error(config_error_code::bad_value, at,
                         "initial state file '" + shown + "' of model '" + config.model_name +
                             "' cannot be read (" + ec.message() + "); it must hold " + needs());
    }
    auto bytes = buffer::allocate(static_cast<std::size_t>(size));
    std::ifstream in{file, std::ios::binary};
    if (size != 0 &&
        !in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size))) {
      throw config_error(config_error_code::bad_value, at,
                         "initial state file '" + shown + "' of model '" + config.model_name +
                             "' cannot be read; it must hold " + needs());
    }
    const bool fits = type == data_type::bytes ? count_bytes_elements(bytes.bytes()) == elements
                                               : bytes.size() == expected;
    if (!fits) {
      throw config_error(config_error_code::bad_value, at,
                         "initial state file '" + shown + "' of model '" + config.model_name +
                             "' holds " + std::to_string(bytes.size()) + " bytes but must hold " +
                             needs());
    }
    return bytes;
  }

  /// Gives `value` its initial contents.
  void initialise(const state_spec& spec, state_value& value) {
    buffer next = spec.from_file ? buffer::copy_of(spec.initial_bytes.bytes())
                                 : buffer::zeroed(detail::zero_state_byte_size(
                                       spec.options.data_type, spec.initial_dims));
    replace(value, std::move(next), spec.initial_dims);
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

  /// `update` for one state; `value` is null when the slot was released while lent.
  [[nodiscard]] status update_one(const state_spec& spec, state_value* value, request& r,
                                  response& out) {
    const auto& options = spec.options;
    // The lent input state leaves the request, its buffer kept if the backend left it there.
    buffer lent;
    bool lent_back = false;
    const auto input = std::find_if(r.inputs.begin(), r.inputs.end(),
                                    [&](const tensor& t) { return t.name == options.input_name; });
    if (input != r.inputs.end()) {
      if (value != nullptr && input->data.size() == value->bytes &&
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
      result = check_output(spec, *output, dims);
      if (result.ok()) {
        buffer next = visible ? buffer::copy_of(output->data.bytes()) : std::move(output->data);
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
    bytes_.fetch_sub(value->bytes, std::memory_order_relaxed);
    *value = state_value{};
    if (result.ok()) {
      result = internal_error("state '" + options.input_name + "' of model '" + model_name_ +
                              "' is lost: the backend moved the input state away and produced "
                              "no output state '" +
                              options.output_name + "'");
    }
    return result;
  }

  /// The concept's checks plus those that read host bytes.
  [[nodiscard]] status check_output(const state_spec& spec, const tensor& t, shape& dims) const {
    auto s = detail::check_output_state(spec.options, t, batched_, model_name_, dims);
    if (!s.ok()) {
      return s;
    }
    const auto prefix = "state '" + spec.options.output_name + "' of model '" + model_name_ + "' ";
    if (!t.data.location().host_accessible()) {
      return invalid_argument(prefix +
                              "is in GPU memory; host_state_store keeps state in CPU memory "
                              "(use a device state store)");
    }
    if (spec.options.data_type == data_type::bytes &&
        count_bytes_elements(t.data.bytes()) != static_cast<std::size_t>(dims.element_count())) {
      return invalid_argument(prefix + "does not hold " + std::to_string(dims.element_count()) +
                              " well-formed TYPE_STRING elements for shape " + to_string(dims));
    }
    return ok_status();
  }

  std::string model_name_;
  bool batched_ = false;
  std::vector<state_spec> specs_;
  std::vector<slot_entry> slots_;
  alignas(64) std::atomic<std::size_t> live_{0};
  alignas(64) std::atomic<std::size_t> bytes_{0};
};

static_assert(state_store<host_state_store>);

} // namespace servekit
