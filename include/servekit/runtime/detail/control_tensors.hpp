#pragma once
/// \file
/// Writes the sequence batcher's control inputs (CONTROL_SEQUENCE_START, _END, _READY,
/// _CORRID) into a request, as the model config lays them out.

#include <servekit/backend/sequence_controls.hpp>
#include <servekit/core/bytes.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/schedule/sequence_batching_options.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace servekit::detail {

/// The control inputs of a model, resolved once from its config. Each request of a batch gets
/// one tensor per control input, of shape [1] (its batch dimension): gathered over the batch,
/// a control is the 1-D tensor of batch size Triton's backends read.
class control_tensors {
public:
  explicit control_tensors(const sequence_batching_options& options) {
    for (const auto& input : options.control_input) {
      if (input.control.empty()) {
        continue;
      }
      const sequence_control& c = input.control.front();
      entry e;
      e.name = input.name;
      e.kind = c.kind;
      e.type = c.tensor_data_type();
      if (c.kind == control_kind::sequence_corrid) {
        // the correlation id is written per request
      } else if (e.type == data_type::fp32) {
        store(e, c.fp32_false_true[0], c.fp32_false_true[1]);
      } else if (e.type == data_type::int32) {
        store(e, c.int32_false_true[0], c.int32_false_true[1]);
      } else {
        store(e, static_cast<std::uint8_t>(c.bool_false_true[0]),
              static_cast<std::uint8_t>(c.bool_false_true[1]));
      }
      entries_.push_back(std::move(e));
    }
  }

  [[nodiscard]] bool empty() const noexcept { return entries_.empty(); }

  /// Appends the control tensors of an entry with controls `c` and correlation id `id` to `r`.
  void write(request& r, const sequence_controls& c, const correlation_id& id) const {
    for (const auto& e : entries_) {
      switch (e.kind) {
      case control_kind::sequence_start:
        r.inputs.push_back(flag(e, c.start));
        break;
      case control_kind::sequence_end:
        r.inputs.push_back(flag(e, c.end));
        break;
      case control_kind::sequence_ready:
        r.inputs.push_back(flag(e, c.ready));
        break;
      case control_kind::sequence_corrid:
        r.inputs.push_back(corrid(e, id));
        break;
      }
    }
  }

private:
  struct entry {
    std::string name;
    control_kind kind = control_kind::sequence_start;
    data_type type = data_type::invalid;
    std::array<std::byte, 4> false_value{};
    std::array<std::byte, 4> true_value{};
  };

  template <class T>
  static void store(entry& e, T false_value, T true_value) noexcept {
    static_assert(sizeof(T) <= 4);
    std::memcpy(e.false_value.data(), &false_value, sizeof(T));
    std::memcpy(e.true_value.data(), &true_value, sizeof(T));
  }

  [[nodiscard]] static tensor flag(const entry& e, bool value) {
    const auto& bytes = value ? e.true_value : e.false_value;
    return tensor{e.name, e.type, shape{1},
                  buffer::copy_of(std::span{bytes.data(), byte_size(e.type)})};
  }

  [[nodiscard]] static tensor corrid(const entry& e, const correlation_id& id) {
    if (e.type == data_type::bytes) {
      const std::string text = id.to_string();
      const std::array<std::string_view, 1> elements{text};
      return tensor{e.name, e.type, shape{1}, encode_bytes(elements)};
    }
    // 32-bit types take the low 32 bits, as Triton's do.
    const std::uint64_t value = id.empty() ? 0 : id.as_uint();
    std::array<std::byte, 8> bytes{};
    const std::size_t size = byte_size(e.type);
    if (size == 8) {
      std::memcpy(bytes.data(), &value, 8);
    } else {
      const auto low = static_cast<std::uint32_t>(value);
      std::memcpy(bytes.data(), &low, 4);
    }
    return tensor{e.name, e.type, shape{1}, buffer::copy_of(std::span{bytes.data(), size})};
  }

  std::vector<entry> entries_;
};

} // namespace servekit::detail
