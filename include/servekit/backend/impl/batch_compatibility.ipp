#pragma once
/// \file
/// Definitions for servekit/backend/batch_compatibility.hpp. Compiled once into servekit::servekit,
/// or included by its header with SERVEKIT_HEADER_ONLY.

#include <servekit/backend/batch_compatibility.hpp>
#include <servekit/core/detail/linkage.hpp>

namespace servekit {

[[nodiscard]] SERVEKIT_DECL bool
batch_compatibility::compatible(const request& first, const request& other) const noexcept {
  for (const auto& name : equal_shape_) {
    const tensor* a = first.find_input(name);
    const tensor* b = other.find_input(name);
    if ((a == nullptr) != (b == nullptr)) {
      return false;
    }
    if (a != nullptr && item_shape(*a) != item_shape(*b)) {
      return false;
    }
  }
  for (const auto& name : shape_tensors_) {
    const tensor* a = first.find_input(name);
    const tensor* b = other.find_input(name);
    if ((a == nullptr) != (b == nullptr)) {
      return false;
    }
    if (a != nullptr &&
        (a->shape != b->shape || a->data.size() != b->data.size() ||
         !a->data.location().host_accessible() || !b->data.location().host_accessible() ||
         (a->data.size() != 0 &&
          std::memcmp(a->data.data(), b->data.data(), a->data.size()) != 0))) {
      return false;
    }
  }
  if (compare_input_sets_) {
    if (first.inputs.size() != other.inputs.size()) {
      return false;
    }
    for (const auto& t : first.inputs) {
      if (other.find_input(t.name) == nullptr) {
        return false;
      }
    }
  }
  return true;
}

} // namespace servekit
