#pragma once
/// \file
/// Optimization profiles: which of a backend's shape ranges serves a batch (TensorRT's
/// min/opt/max profiles, chosen as Triton's TensorRT backend chooses them).
///
/// An engine built for dynamic shapes is tuned for a few ranges of input shapes, one execution
/// context per range. Triton runs a batch on the context whose profile admits every input shape
/// and whose `opt` shapes are nearest, by Manhattan distance, to the batch's shapes
/// (GetMostOptimizedProfile). This header holds that decision as a pure policy: no CUDA, so it is
/// tested in every build.

#include <servekit/backend/batch.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/core/status.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace servekit::cuda {

/// The shapes one input may take under a profile. Full shapes, with the batch dimension when the
/// model batches, as TensorRT profiles are. Every dim is concrete (no -1) and
/// 0 <= min <= opt <= max.
struct input_range {
  std::string name;
  shape min;
  shape opt; ///< the shape the engine is tuned for
  shape max;
};

/// One profile: a range per input. Every profile of a selector lists the same inputs.
struct optimization_profile {
  std::string name;
  std::vector<input_range> inputs;
};

/// An input's shape in one execution, as `profile_selector::select` takes it.
struct named_shape {
  std::string_view name;
  shape dims;
};

/// Picks the profile a batch runs under.
///
/// A profile admits the batch when, for every given input, each dim lies within [min, max]. Of
/// the profiles that admit it, `select` returns the one with the smallest Manhattan distance to
/// the batch, the sum of |dim - opt| over every given input and dim; ties go to the lowest index.
/// Inputs left out of the query (an optional input the requests omit) are not checked, as Triton
/// checks only the inputs a request carries.
///
/// `select` allocates nothing unless it fails, so it can run for every batch.
class profile_selector {
public:
  /// Validates the profiles; throws config_error (code bad_value, no path: profiles are declared
  /// by a backend, not read from the model config) when the list is empty, a profile name is
  /// empty or repeated, a profile lists no input or one input twice, profiles list different
  /// inputs, an input's shapes differ in rank (within a profile or between profiles), or a dim
  /// breaks 0 <= min <= opt <= max.
  explicit profile_selector(std::vector<optimization_profile> profiles)
      : profiles_{std::move(profiles)} {
    if (profiles_.empty()) {
      fail("a profile_selector needs at least one optimization profile");
    }
    for (std::size_t p = 0; p < profiles_.size(); ++p) {
      check_profile(p);
    }
  }

  /// The profiles, as given.
  [[nodiscard]] std::span<const optimization_profile> profiles() const noexcept {
    return profiles_;
  }

  /// Sets `index` to the profile that serves `shapes` (see the class comment). Fails with
  /// invalid_argument, leaving `index` alone, when an input is not in the profiles or no profile
  /// admits the shapes; the latter message lists the profiles and the requested dims as Triton's
  /// does: "failed to find any optimization profile among [ p0[0] p1[1]] to support the
  /// requested dimensions: INPUT0 [8,300], INPUT1 [8,2]".
  [[nodiscard]] status select(std::span<const named_shape> shapes, std::size_t& index) const {
    for (const auto& s : shapes) {
      if (find_range(profiles_.front(), s.name) == nullptr) {
        return invalid_argument("input '" + std::string{s.name} +
                                "' is in no optimization profile; the profiles cover " +
                                input_names());
      }
    }
    std::optional<std::size_t> best;
    std::int64_t shortest = std::numeric_limits<std::int64_t>::max();
    for (std::size_t p = 0; p < profiles_.size(); ++p) {
      if (const auto d = distance(profiles_[p], shapes); d && (!best || *d < shortest)) {
        best = p;
        shortest = *d;
      }
    }
    if (!best) {
      return no_profile_error(shapes);
    }
    index = *best;
    return ok_status();
  }

private:
  [[noreturn]] static void fail(const std::string& message) {
    throw config_error(config_error_code::bad_value, "", message);
  }

  /// `profile`'s range for input `name`, or null. A linear search: profiles list a few inputs.
  [[nodiscard]] static const input_range* find_range(const optimization_profile& profile,
                                                     std::string_view name) noexcept {
    const auto it = std::find_if(profile.inputs.begin(), profile.inputs.end(),
                                 [&](const input_range& r) { return r.name == name; });
    return it == profile.inputs.end() ? nullptr : &*it;
  }

  /// The distance from `profile`'s opt shapes to `shapes`, or nothing when it does not admit
  /// them. Every name in `shapes` is known (select checked).
  [[nodiscard]] static std::optional<std::int64_t>
  distance(const optimization_profile& profile, std::span<const named_shape> shapes) noexcept {
    std::int64_t total = 0;
    for (const auto& s : shapes) {
      const auto& range = *find_range(profile, s.name);
      if (s.dims.rank() != range.opt.rank()) {
        return std::nullopt;
      }
      for (std::size_t i = 0; i < s.dims.rank(); ++i) {
        const auto d = s.dims[i];
        if (d < range.min[i] || d > range.max[i]) {
          return std::nullopt;
        }
        total += d > range.opt[i] ? d - range.opt[i] : range.opt[i] - d;
      }
    }
    return total;
  }

  [[nodiscard]] status no_profile_error(std::span<const named_shape> shapes) const {
    std::string message = "failed to find any optimization profile among [";
    for (std::size_t p = 0; p < profiles_.size(); ++p) {
      message += ' ' + profiles_[p].name + '[' + std::to_string(p) + ']';
    }
    message += "] to support the requested dimensions:";
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      message +=
          (i == 0 ? " " : ", ") + std::string{shapes[i].name} + ' ' + to_string(shapes[i].dims);
    }
    return invalid_argument(std::move(message));
  }

  /// "'INPUT0', 'INPUT1'": the first profile's inputs, for messages.
  [[nodiscard]] std::string input_names() const {
    std::string names;
    for (const auto& r : profiles_.front().inputs) {
      names += (names.empty() ? "'" : ", '") + r.name + '\'';
    }
    return names;
  }

  /// Checks profile `p` on its own and against the first profile.
  void check_profile(std::size_t p) const {
    const auto& profile = profiles_[p];
    const auto where = "optimization profile '" + profile.name + "' [" + std::to_string(p) + "]";
    if (profile.name.empty()) {
      fail("optimization profile [" + std::to_string(p) + "] has no name");
    }
    for (std::size_t q = 0; q < p; ++q) {
      if (profiles_[q].name == profile.name) {
        fail(where + " has the name of profile [" + std::to_string(q) + "]");
      }
    }
    if (profile.inputs.empty()) {
      fail(where + " lists no input");
    }
    for (std::size_t i = 0; i < profile.inputs.size(); ++i) {
      check_range(where, profile.inputs[i]);
      for (std::size_t j = 0; j < i; ++j) {
        if (profile.inputs[j].name == profile.inputs[i].name) {
          fail(where + " lists input '" + profile.inputs[i].name + "' twice");
        }
      }
    }
    if (p == 0) {
      return;
    }
    const auto& first = profiles_.front();
    if (profile.inputs.size() != first.inputs.size()) {
      fail(where + " lists " + std::to_string(profile.inputs.size()) + " inputs but profile '" +
           first.name + "' [0] lists " + std::to_string(first.inputs.size()) +
           "; every profile covers the same inputs");
    }
    for (const auto& reference : first.inputs) {
      const input_range* r = find_range(profile, reference.name);
      if (r == nullptr) {
        fail(where + " does not list input '" + reference.name + "', which profile '" + first.name +
             "' [0] lists; every profile covers the same inputs");
      }
      if (r->opt.rank() != reference.opt.rank()) {
        fail(where + " gives input '" + r->name + "' rank " + std::to_string(r->opt.rank()) +
             " but profile '" + first.name + "' [0] gives rank " +
             std::to_string(reference.opt.rank()));
      }
    }
  }

  static void check_range(const std::string& where, const input_range& r) {
    const auto shapes = [&] {
      return "min " + to_string(r.min) + ", opt " + to_string(r.opt) + ", max " + to_string(r.max);
    };
    if (r.name.empty()) {
      fail(where + " lists an input with no name");
    }
    if (r.min.rank() != r.opt.rank() || r.opt.rank() != r.max.rank()) {
      fail(where + " input '" + r.name + "' has shapes of different ranks: " + shapes());
    }
    for (std::size_t i = 0; i < r.opt.rank(); ++i) {
      if (r.min[i] < 0 || r.min[i] > r.opt[i] || r.opt[i] > r.max[i]) {
        fail(where + " input '" + r.name + "' breaks 0 <= min <= opt <= max at dim " +
             std::to_string(i) + ": " + shapes());
      }
    }
  }

  std::vector<optimization_profile> profiles_;
};

/// The shape of input `input` over the whole batch, as an engine sees it once the requests are
/// gathered: when the model batches, the first request's shape with the batch dimension set to
/// the batch's total (`b.batch_size()`); otherwise the first request's shape. The requests of one
/// batch agree on their other dims (batch_compatibility sees to it for variable dims).
///
/// Nothing when the batch is empty or its requests do not carry `input` (an optional input they
/// omit: requests of one batch carry the same optional inputs).
[[nodiscard]] inline std::optional<shape> batch_input_shape(const batch& b,
                                                            std::string_view input) {
  if (b.empty()) {
    return std::nullopt;
  }
  const tensor* first = b.request(0).find_input(input);
  if (first == nullptr) {
    return std::nullopt;
  }
  shape dims = first->shape;
  if (b.instance().max_batch_size > 0 && !dims.empty()) {
    dims[0] = b.batch_size();
  }
  return dims;
}

} // namespace servekit::cuda
