#pragma once
/// \file
/// The state store role: where a sequence batcher keeps Triton's implicit state between the
/// requests of a sequence, and the settings a store is built from.

#include <servekit/core/buffer.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/response.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/state/state_options.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servekit {

/// Tag naming the state store role: a policy type opts in with `using policy_role =
/// state_store_role;` so that nothing plays the role by accident.
struct state_store_role {};

/// Everything a state store needs, resolved from the model's options.
struct state_store_config {
  std::string model_name;
  /// `sequence_batching.state`, already validated (names, types, initial_state dims).
  std::vector<state_options> states;
  /// Sequence slots over all instances; slot ids are 0..slots-1.
  std::size_t slots = 0;
  /// max_batch_size > 0: state tensors carry a leading batch dimension of 1.
  bool batched = false;
  /// Declared output names: a state output listed here may be returned to clients.
  std::vector<std::string> model_outputs;
  /// initial_state data files are read from `<model_directory>/initial_state/`; empty: the
  /// working directory.
  std::string model_directory;
  /// Where each slot's instance runs, one entry per slot: `memory_location::gpu(d)` for a slot
  /// of an instance on GPU d, cpu otherwise; empty: every slot is on the CPU. A device state
  /// store keeps a slot's state where its instance computes. Slot s belongs to instance
  /// s / (slots / instances).
  std::vector<memory_location> slot_locations;
};

namespace detail {

/// Built from the config once, when the model loads; may throw config_error.
template <class S>
concept state_store_constructible_from_config =
    std::constructible_from<S, const state_store_config&>;

/// `static constexpr bool supports_growable_memory`: whether the store honours
/// `use_growable_memory` (Triton: CUDA memory only). A store that does not refuses such a state
/// at construction.
template <class S>
concept state_store_declares_growable_memory = requires {
  { S::supports_growable_memory } -> std::convertible_to<bool>;
};

/// `status bind(std::size_t slot, bool start, request&)`: lends the slot's state to a request
/// as its state inputs, just before the backend executes it.
template <class S>
concept state_store_has_bind = requires(S& s, std::size_t slot, bool start, request& r) {
  { s.bind(slot, start, r) } -> std::same_as<status>;
};

/// `status update(std::size_t slot, request&, response&)`: takes the state back (the output
/// state, or the lent input state) after the backend executed the request.
template <class S>
concept state_store_has_update = requires(S& s, std::size_t slot, request& r, response& out) {
  { s.update(slot, r, out) } -> std::same_as<status>;
};

/// `void release(std::size_t slot)`: frees the slot's state (END, idle expiry); idempotent.
template <class S>
concept state_store_has_release = requires(S& s, std::size_t slot) {
  s.release(slot);
};

/// `std::size_t live_sequences() const`: slots holding state.
template <class S>
concept state_store_has_live_sequences = requires(const S& cs) {
  { cs.live_sequences() } -> std::same_as<std::size_t>;
};

/// `std::size_t bytes_in_use() const`: bytes held for live slots, lent ones included.
template <class S>
concept state_store_has_bytes_in_use = requires(const S& cs) {
  { cs.bytes_in_use() } -> std::same_as<std::size_t>;
};

} // namespace detail

/// Keeps Triton's implicit state (`sequence_batching.state`) per sequence slot.
///
/// `bind(slot, start, r)` is called just before the backend executes request `r` of the
/// sequence in `slot`. When `start` is set (a START request, a restarted sequence included) or
/// the slot holds no state yet, each state is (re)initialised from its `initial_state`:
/// `zero_data` gives zeros of the initial dims, `data_file` the file's bytes (read once, at
/// construction). Without `initial_state`, Triton hands the model uninitialised memory with
/// every variable (-1) dim set to 1; we zero-fill it instead, so that a model that forgets to
/// initialise behaves the same on every run. Then one tensor per state is appended to
/// `r.inputs`: named `input_name`, of `data_type`, shaped as the state (with a leading 1 when the
/// model batches). Zero copy: the slot's buffer moves into the tensor; `update` takes it back.
///
/// `update(slot, r, out)` is called after the backend executed `r` and before `out` goes to the
/// client. Per state, an output named `output_name` in `out.outputs` becomes the new state if
/// its type equals the state's, its shape (less a leading batch dim, which must be 1, when the
/// model batches) is admitted by the state's dims and its byte size fits the shape. It is moved
/// out of the response, unless the client may see it (`output_name` is a declared model output
/// and `r.wants_output(output_name)`): then the store keeps a copy and the tensor stays. An
/// output state that is not a declared output is always removed from the response. Without an
/// output state the lent input buffer goes back to the slot: with
/// `use_same_buffer_for_input_output` that is how the state advances (the backend updates the
/// input state in place); otherwise the backend must not write the input state, and the state
/// is unchanged. A failed response (`!out.ok()`) does not advance the state. In every case the
/// input-state tensors leave `r.inputs`.
///
/// Errors come back as a status naming the state and the model, and leave the previous state in
/// place. If neither an output state nor the lent input state is there (the backend moved it
/// away), that is an internal error and the state is lost: the sequence must restart.
///
/// `release(slot)` frees the slot's state (END, idle expiry); it is idempotent.
/// `live_sequences()` counts the slots holding state (from their first bind until release);
/// `bytes_in_use()` the bytes held for them, lent buffers included.
///
/// Threads: distinct slots may be used from distinct threads at once, with no lock; one slot is
/// never used by two threads at once. The counters may be read from any thread.
template <class S>
concept state_store = detail::state_store_constructible_from_config<S> &&
    detail::state_store_declares_growable_memory<S> && detail::state_store_has_bind<S> &&
    detail::state_store_has_update<S> && detail::state_store_has_release<S> &&
    detail::state_store_has_live_sequences<S> && detail::state_store_has_bytes_in_use<S>;

/// Checks a state store (the Store of `sequence_batcher<Strategy, Store>`) with one readable
/// message per missing member. model<...> calls it first, so users see these messages rather
/// than "constraints not satisfied".
template <class S>
consteval bool check_state_store() {
  static_assert(detail::state_store_constructible_from_config<S>,
                "servekit: a state store needs a public constructor "
                "`explicit S(const servekit::state_store_config&)` and a public destructor");
  static_assert(detail::state_store_declares_growable_memory<S>,
                "servekit: a state store needs "
                "`static constexpr bool supports_growable_memory = ...;`");
  static_assert(detail::state_store_has_bind<S>,
                "servekit: a state store needs "
                "`servekit::status bind(std::size_t slot, bool start, servekit::request&)`");
  static_assert(detail::state_store_has_update<S>,
                "servekit: a state store needs `servekit::status update(std::size_t slot, "
                "servekit::request&, servekit::response&)`");
  static_assert(detail::state_store_has_release<S>,
                "servekit: a state store needs `void release(std::size_t slot)`");
  static_assert(detail::state_store_has_live_sequences<S>,
                "servekit: a state store needs `std::size_t live_sequences() const`");
  static_assert(detail::state_store_has_bytes_in_use<S>,
                "servekit: a state store needs `std::size_t bytes_in_use() const`");
  return true;
}

namespace detail {

/// The dims a state starts with: the initial_state's dims, or the state's dims with every
/// variable dim set to 1 (Triton's rule for a state without initial_state).
[[nodiscard]] inline shape initial_state_shape(const state_options& state) {
  if (!state.initial_state.empty()) {
    return state.initial_state.front().dims;
  }
  shape dims = state.dims;
  for (std::size_t i = 0; i < dims.rank(); ++i) {
    if (dims[i] == shape::variable) {
      dims[i] = 1;
    }
  }
  return dims;
}

/// Bytes of a fixed-size state of `dims`; for BYTES, the size of that many empty strings
/// (a 4-byte zero length each), which is what a zero-filled BYTES state holds.
[[nodiscard]] inline std::size_t zero_state_byte_size(data_type type, const shape& dims) {
  const auto elements = static_cast<std::size_t>(dims.element_count());
  return type == data_type::bytes ? elements * sizeof(std::uint32_t) : elements * byte_size(type);
}

/// Checks an output state tensor against its state's type and dims; on success `dims` holds its
/// dims without the batch dim. The byte size is checked here for fixed-size types only: BYTES
/// needs the bytes, which a store reads where they live.
[[nodiscard]] inline status check_output_state(const state_options& state, const tensor& t,
                                               bool batched, std::string_view model_name,
                                               shape& dims) {
  const auto prefix = [&] {
    return "state '" + state.output_name + "' of model '" + std::string{model_name} + "' ";
  };
  if (t.type != state.data_type) {
    return invalid_argument(prefix() + "has data type " + std::string{to_config_string(t.type)} +
                            " but the config says " +
                            std::string{to_config_string(state.data_type)});
  }
  if (batched) {
    if (t.shape.empty() || t.shape[0] != 1) {
      return invalid_argument(prefix() + "has shape " + to_string(t.shape) +
                              " but a sequence's state needs a leading batch dimension of 1");
    }
    dims = t.shape.without_batch();
  } else {
    dims = t.shape;
  }
  const bool negative = std::any_of(dims.begin(), dims.end(), [](std::int64_t d) { return d < 0; });
  if (negative || !state.dims.admits(dims)) {
    return invalid_argument(prefix() + "has shape " + to_string(dims) + " but the config says " +
                            to_string(state.dims));
  }
  if (state.data_type != data_type::bytes) {
    const auto expected = static_cast<std::size_t>(dims.element_count()) * byte_size(t.type);
    if (t.data.size() != expected) {
      return invalid_argument(prefix() + "holds " + std::to_string(t.data.size()) +
                              " bytes but shape " + to_string(dims) + " of " +
                              std::string{to_config_string(t.type)} + " needs " +
                              std::to_string(expected));
    }
  }
  return ok_status();
}

} // namespace detail

} // namespace servekit
