#pragma once
/// \file
/// host_state_store: implicit sequence state kept in CPU memory, lent to requests without a copy.

#include <servekit/core/buffer.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/state/detail/basic_state_store.hpp>
#include <servekit/state/detail/state_spec.hpp>
#include <servekit/state/state_store.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace servekit {

namespace detail {

/// basic_state_store's memory policy for CPU memory: a state is a host buffer; an output state
/// is taken as it is, or copied when the client sees it. cuda::device_state_store serves its CPU
/// slots with it too.
struct host_state_memory {
  /// Every slot is in host memory: nothing to tell them apart.
  struct slot_place {};

  /// Refuses growable state, which Triton offers only in CUDA memory.
  explicit host_state_memory(const state_store_config& config) {
    for (std::size_t i = 0; i < config.states.size(); ++i) {
      const auto& options = config.states[i];
      if (options.use_growable_memory) {
        throw config_error(config_error_code::bad_value,
                           "/sequence_batching/state/" + std::to_string(i) + "/use_growable_memory",
                           "state '" + options.input_name + "' of model '" + config.model_name +
                               "' asks for growable memory, which needs a device state store "
                               "(as in Triton, where growable state is CUDA memory only); "
                               "host_state_store keeps fixed-size state in CPU memory");
      }
    }
  }

  [[nodiscard]] static slot_place place_of(const state_store_config&, std::size_t) noexcept {
    return {};
  }

  [[nodiscard]] static status initialise(slot_place, const state_spec& spec, std::string_view,
                                         buffer& out) {
    out = spec.from_file
              ? buffer::copy_of(spec.initial_bytes.bytes())
              : buffer::zeroed(zero_state_byte_size(spec.options.data_type, spec.initial_dims));
    return ok_status();
  }

  [[nodiscard]] static bool takes_back(slot_place, const buffer&) noexcept { return true; }

  /// Refuses an output state the CPU cannot read, or TYPE_STRING bytes that are not well
  /// formed (a later step would read them).
  [[nodiscard]] static status keep(slot_place, const state_spec& spec, std::string_view model,
                                   tensor& output, const shape& dims, bool visible, buffer& next) {
    const auto prefix =
        "state '" + spec.options.output_name + "' of model '" + std::string{model} + "' ";
    if (!output.data.location().host_accessible()) {
      return invalid_argument(prefix +
                              "is in GPU memory; host_state_store keeps state in CPU memory "
                              "(use a device state store)");
    }
    if (spec.options.data_type == data_type::bytes &&
        count_bytes_elements(output.data.bytes()) !=
            static_cast<std::size_t>(dims.element_count())) {
      return invalid_argument(prefix + "does not hold " + std::to_string(dims.element_count()) +
                              " well-formed TYPE_STRING elements for shape " + to_string(dims));
    }
    next = visible ? buffer::copy_of(output.data.bytes()) : std::move(output.data);
    return ok_status();
  }
};

} // namespace detail

/// The state store for CPU memory (see the `state_store` concept for what each member does).
///
/// Each slot owns one buffer per state. `bind` moves it into the request as the state input,
/// `update` moves the output state (or the lent buffer) back: a sequence step copies no state
/// bytes, unless the client asked to see the output state. Memory is bounded by the live
/// sequences: a released slot holds nothing.
///
/// Triton offers growable state only in CUDA memory, and so does servekit: this store refuses
/// `use_growable_memory` at construction.
///
/// The flow is detail::basic_state_store's, which cuda::device_state_store shares; this store is
/// that flow over host memory.
class host_state_store : public detail::basic_state_store<detail::host_state_memory> {
public:
  using policy_role = state_store_role;
  static constexpr bool supports_growable_memory = false;

  /// Reads every initial_state data file now, so that a missing or short file fails the load
  /// rather than the first request. Throws config_error.
  using basic_state_store::basic_state_store;
};

static_assert(state_store<host_state_store>);

} // namespace servekit
