#pragma once
/// \file
/// An ensemble's graph as plain data, and the checks Triton applies to it at model load. The
/// checks are `constexpr`, so the compile-time form (`servekit::ensemble<...>`) runs them in the
/// compiler and the configured form (`servekit::runtime_ensemble`) runs the same code at load.

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace servekit {

/// One entry of a step's input_map or output_map: a composing model's tensor and the ensemble
/// tensor it reads from or writes to.
struct tensor_mapping {
  std::string_view model_tensor;
  std::string_view ensemble_tensor;
};

/// Whether a model's tensors carry the batch dimension: known at load (max_batch_size > 0),
/// unknown at compile time (max_batch_size is configuration), where both readings are accepted.
enum class batch_dim : std::uint8_t { unknown, present, absent };

/// One step as the checks see it.
struct step_description {
  std::string_view model; ///< for messages
  std::span<const tensor_mapping> input_map;
  std::span<const tensor_mapping> output_map;
  std::span<const tensor_declaration>
      declared_inputs; ///< empty: the model declares none (unchecked)
  std::span<const tensor_declaration> declared_outputs;
  batch_dim batching = batch_dim::unknown;
  bool decoupled = false; ///< legal: each of its responses is an iteration downstream
};

/// A whole ensemble as the checks see it.
struct ensemble_description {
  std::span<const std::string_view> inputs;
  std::span<const std::string_view> outputs;
  std::span<const step_description> steps;
  /// The ensemble's own declarations (a configured ensemble has them); empty: not declared.
  std::span<const tensor_declaration> declared_inputs;
  std::span<const tensor_declaration> declared_outputs;
  batch_dim batching = batch_dim::unknown;
};

/// What is wrong with an ensemble, in the order the checks look.
enum class ensemble_fault : std::uint8_t {
  none,
  no_steps,                ///< an ensemble needs at least one step
  duplicate_name,          ///< an ensemble input or output is listed twice
  undeclared_model_tensor, ///< a mapping names a tensor the step's model does not declare
  model_tensor_mapped_twice,
  unmapped_model_input, ///< a required input of the step's model is not mapped
  two_producers,        ///< two step outputs (or an ensemble input and a step) write one tensor
  unprovided_tensor,    ///< a step reads a tensor nothing provides
  unproduced_output,    ///< an ensemble output no step produces
  unused_input,         ///< an ensemble input no step reads
  cycle,
  type_mismatch, ///< producer and consumer disagree on the data type
  dims_mismatch, ///< ... or on the dims (allowing for the batch dimension)
};

/// Who is on the other side of a producer/consumer problem.
enum class ensemble_peer : std::uint8_t { none, step, ensemble_input, ensemble_output };

/// The first problem found, located precisely enough to name it.
struct ensemble_problem {
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  ensemble_fault fault = ensemble_fault::none;
  std::size_t step = npos;    ///< the step at fault (npos: the ensemble itself)
  std::size_t mapping = npos; ///< index in that step's input_map or output_map
  bool output_side = false;   ///< whether `mapping` indexes output_map
  std::string_view tensor{};  ///< the name at fault (see the fault)
  ensemble_peer peer = ensemble_peer::none;
  std::size_t peer_step = npos;
  std::size_t peer_mapping = npos;

  [[nodiscard]] constexpr explicit operator bool() const noexcept {
    return fault != ensemble_fault::none;
  }
};

namespace detail {

[[nodiscard]] constexpr bool contains(std::span<const std::string_view> names,
                                      std::string_view name) noexcept {
  for (const auto n : names) {
    if (n == name) {
      return true;
    }
  }
  return false;
}

/// The spec named `name`, by value: comparing addresses of a backend's `static constexpr` specs
/// with null is not a constant expression for every compiler configuration (g++ with ASan).
[[nodiscard]] constexpr std::optional<tensor_declaration>
find_spec(std::span<const tensor_declaration> specs, std::string_view name) noexcept {
  for (const auto& s : specs) {
    if (s.name == name) {
      return s;
    }
  }
  return std::nullopt;
}

/// Same rank and every dim equal or -1 on either side (Triton's CompareDimsWithWildcard).
[[nodiscard]] constexpr bool dims_agree(const shape& a, const shape& b) noexcept {
  if (a.rank() != b.rank()) {
    return false;
  }
  for (std::size_t i = 0; i < a.rank(); ++i) {
    if (a[i] != b[i] && a[i] != shape::variable && b[i] != shape::variable) {
      return false;
    }
  }
  return true;
}

/// Dims of a producer and a consumer agree, directly or once the side that batches is given
/// its batch dimension ([d0, d1] batching against [-1, d0, d1] not batching), as Triton
/// accepts for a tensor passed between a batching and a non-batching model.
[[nodiscard]] constexpr bool dims_compatible(const shape& produced, batch_dim producer,
                                             const shape& consumed, batch_dim consumer) noexcept {
  if (dims_agree(produced, consumed)) {
    return true;
  }
  if (produced.rank() < shape::max_rank && producer != batch_dim::absent &&
      consumer != batch_dim::present && dims_agree(produced.with_batch(-1), consumed)) {
    return true;
  }
  return consumed.rank() < shape::max_rank && consumer != batch_dim::absent &&
         producer != batch_dim::present && dims_agree(produced, consumed.with_batch(-1));
}

/// Where a tensor comes from.
struct tensor_source {
  ensemble_peer kind = ensemble_peer::none; ///< none, ensemble_input or step
  std::size_t step = ensemble_problem::npos;
  std::size_t mapping = ensemble_problem::npos;
};

[[nodiscard]] constexpr tensor_source source_of(const ensemble_description& d,
                                                std::string_view tensor) noexcept {
  if (contains(d.inputs, tensor)) {
    return {ensemble_peer::ensemble_input, ensemble_problem::npos, ensemble_problem::npos};
  }
  for (std::size_t s = 0; s < d.steps.size(); ++s) {
    const auto& outs = d.steps[s].output_map;
    for (std::size_t m = 0; m < outs.size(); ++m) {
      if (outs[m].ensemble_tensor == tensor) {
        return {ensemble_peer::step, s, m};
      }
    }
  }
  return {};
}

[[nodiscard]] constexpr ensemble_problem check_names(const ensemble_description& d) noexcept {
  for (std::size_t i = 0; i < d.inputs.size(); ++i) {
    if (contains(d.inputs.first(i), d.inputs[i]) || contains(d.outputs, d.inputs[i])) {
      return {.fault = ensemble_fault::duplicate_name, .tensor = d.inputs[i]};
    }
  }
  for (std::size_t i = 0; i < d.outputs.size(); ++i) {
    if (contains(d.outputs.first(i), d.outputs[i])) {
      return {.fault = ensemble_fault::duplicate_name, .tensor = d.outputs[i]};
    }
  }
  return {};
}

[[nodiscard]] constexpr ensemble_problem check_step_mappings(const step_description& step,
                                                             std::size_t s) noexcept {
  for (int side = 0; side < 2; ++side) {
    const bool outputs = side == 1;
    const auto map = outputs ? step.output_map : step.input_map;
    const auto declared = outputs ? step.declared_outputs : step.declared_inputs;
    for (std::size_t m = 0; m < map.size(); ++m) {
      const auto name = map[m].model_tensor;
      for (std::size_t k = 0; k < m; ++k) {
        if (map[k].model_tensor == name) {
          return {.fault = ensemble_fault::model_tensor_mapped_twice,
                  .step = s,
                  .mapping = m,
                  .output_side = outputs,
                  .tensor = name};
        }
      }
      if (!declared.empty() && !find_spec(declared, name)) {
        return {.fault = ensemble_fault::undeclared_model_tensor,
                .step = s,
                .mapping = m,
                .output_side = outputs,
                .tensor = name};
      }
    }
  }
  for (const auto& spec : step.declared_inputs) {
    bool mapped = false;
    for (const auto& m : step.input_map) {
      mapped = mapped || m.model_tensor == spec.name;
    }
    if (!mapped && !spec.optional) {
      return {.fault = ensemble_fault::unmapped_model_input, .step = s, .tensor = spec.name};
    }
  }
  return {};
}

[[nodiscard]] constexpr ensemble_problem check_connections(const ensemble_description& d) noexcept {
  // Each tensor has one producer: an ensemble input or one step output.
  for (std::size_t s = 0; s < d.steps.size(); ++s) {
    const auto& outs = d.steps[s].output_map;
    for (std::size_t m = 0; m < outs.size(); ++m) {
      const auto first = source_of(d, outs[m].ensemble_tensor);
      if (first.kind == ensemble_peer::ensemble_input ||
          (first.kind == ensemble_peer::step && (first.step != s || first.mapping != m))) {
        return {.fault = ensemble_fault::two_producers,
                .step = s,
                .mapping = m,
                .output_side = true,
                .tensor = outs[m].ensemble_tensor,
                .peer = first.kind,
                .peer_step = first.step,
                .peer_mapping = first.mapping};
      }
    }
  }
  for (std::size_t s = 0; s < d.steps.size(); ++s) {
    const auto& ins = d.steps[s].input_map;
    for (std::size_t m = 0; m < ins.size(); ++m) {
      if (source_of(d, ins[m].ensemble_tensor).kind == ensemble_peer::none) {
        return {.fault = ensemble_fault::unprovided_tensor,
                .step = s,
                .mapping = m,
                .tensor = ins[m].ensemble_tensor};
      }
    }
  }
  for (const auto out : d.outputs) {
    if (source_of(d, out).kind != ensemble_peer::step) {
      return {.fault = ensemble_fault::unproduced_output, .tensor = out};
    }
  }
  for (const auto in : d.inputs) {
    bool used = false;
    for (const auto& step : d.steps) {
      for (const auto& m : step.input_map) {
        used = used || m.ensemble_tensor == in;
      }
    }
    if (!used) {
      return {.fault = ensemble_fault::unused_input, .tensor = in};
    }
  }
  return {};
}

/// Kahn's algorithm over steps; a step left over sits on (or behind) a cycle.
[[nodiscard]] constexpr ensemble_problem check_acyclic(const ensemble_description& d) {
  const std::size_t n = d.steps.size();
  std::vector<std::size_t> waiting(n, 0); // inputs not yet produced, per step
  for (std::size_t s = 0; s < n; ++s) {
    for (const auto& m : d.steps[s].input_map) {
      if (source_of(d, m.ensemble_tensor).kind == ensemble_peer::step) {
        ++waiting[s];
      }
    }
  }
  std::vector<std::size_t> ready;
  for (std::size_t s = 0; s < n; ++s) {
    if (waiting[s] == 0) {
      ready.push_back(s);
    }
  }
  std::size_t done = 0;
  while (!ready.empty()) {
    const std::size_t p = ready.back();
    ready.pop_back();
    ++done;
    for (std::size_t s = 0; s < n; ++s) {
      for (const auto& m : d.steps[s].input_map) {
        const auto src = source_of(d, m.ensemble_tensor);
        if (src.kind == ensemble_peer::step && src.step == p && --waiting[s] == 0) {
          ready.push_back(s);
        }
      }
    }
  }
  if (done == n) {
    return {};
  }
  // Report the first step still waiting on a step that is itself still waiting.
  for (std::size_t s = 0; s < n; ++s) {
    if (waiting[s] == 0) {
      continue;
    }
    for (std::size_t m = 0; m < d.steps[s].input_map.size(); ++m) {
      const auto src = source_of(d, d.steps[s].input_map[m].ensemble_tensor);
      if (src.kind == ensemble_peer::step && waiting[src.step] != 0) {
        return {.fault = ensemble_fault::cycle,
                .step = s,
                .mapping = m,
                .tensor = d.steps[s].input_map[m].ensemble_tensor,
                .peer = ensemble_peer::step,
                .peer_step = src.step,
                .peer_mapping = src.mapping};
      }
    }
  }
  return {.fault = ensemble_fault::cycle};
}

/// The spec and batching of what provides `tensor` to a consumer, when known.
struct provided_spec {
  std::optional<tensor_declaration> spec;
  batch_dim batching = batch_dim::unknown;
  tensor_source source;
  bool from_reader = false; ///< an undeclared ensemble input: `source` is its first declared reader
};

[[nodiscard]] constexpr provided_spec provider_spec(const ensemble_description& d,
                                                    std::string_view tensor) noexcept {
  const auto src = source_of(d, tensor);
  if (src.kind == ensemble_peer::step) {
    const auto& p = d.steps[src.step];
    return {find_spec(p.declared_outputs, p.output_map[src.mapping].model_tensor), p.batching, src,
            false};
  }
  if (src.kind == ensemble_peer::ensemble_input) {
    if (auto declared = find_spec(d.declared_inputs, tensor)) {
      return {declared, d.batching, src, false};
    }
    // Undeclared ensemble input: its first consumer that declares it sets the expectation.
    for (std::size_t s = 0; s < d.steps.size(); ++s) {
      const auto& c = d.steps[s];
      for (std::size_t m = 0; m < c.input_map.size(); ++m) {
        if (c.input_map[m].ensemble_tensor != tensor) {
          continue;
        }
        if (auto spec = find_spec(c.declared_inputs, c.input_map[m].model_tensor)) {
          return {spec, c.batching, {ensemble_peer::step, s, m}, true};
        }
      }
    }
  }
  return {};
}

[[nodiscard]] constexpr ensemble_problem
mismatch(const tensor_declaration& produced, batch_dim producer, const tensor_declaration& consumed,
         batch_dim consumer, ensemble_problem where) noexcept {
  if (produced.type != consumed.type) {
    where.fault = ensemble_fault::type_mismatch;
    return where;
  }
  if (!dims_compatible(produced.dims, producer, consumed.dims, consumer)) {
    where.fault = ensemble_fault::dims_mismatch;
    return where;
  }
  return {};
}

[[nodiscard]] constexpr ensemble_problem check_types(const ensemble_description& d) noexcept {
  for (std::size_t s = 0; s < d.steps.size(); ++s) {
    const auto& c = d.steps[s];
    for (std::size_t m = 0; m < c.input_map.size(); ++m) {
      const auto consumed = find_spec(c.declared_inputs, c.input_map[m].model_tensor);
      const auto provided = provider_spec(d, c.input_map[m].ensemble_tensor);
      const bool itself =
          provided.from_reader && provided.source.step == s && provided.source.mapping == m;
      if (!consumed || !provided.spec || itself) {
        continue;
      }
      const bool from_input =
          find_spec(d.declared_inputs, c.input_map[m].ensemble_tensor).has_value();
      const ensemble_problem where{.step = s,
                                   .mapping = m,
                                   .tensor = c.input_map[m].ensemble_tensor,
                                   .peer = from_input ? ensemble_peer::ensemble_input
                                                      : provided.source.kind,
                                   .peer_step = provided.source.step,
                                   .peer_mapping = provided.source.mapping};
      if (auto p = mismatch(*provided.spec, provided.batching, *consumed, c.batching, where)) {
        return p;
      }
    }
  }
  for (const auto out : d.outputs) {
    const auto declared = find_spec(d.declared_outputs, out);
    const auto provided = provider_spec(d, out);
    if (!declared || !provided.spec) {
      continue;
    }
    const ensemble_problem where{.step = provided.source.step,
                                 .mapping = provided.source.mapping,
                                 .output_side = true,
                                 .tensor = out,
                                 .peer = ensemble_peer::ensemble_output};
    if (auto p = mismatch(*provided.spec, provided.batching, *declared, d.batching, where)) {
      return p;
    }
  }
  return {};
}

} // namespace detail

/// The first problem of `d`, or none. Runs at compile time for `servekit::ensemble<...>` and at
/// load for a configured ensemble.
[[nodiscard]] constexpr ensemble_problem find_problem(const ensemble_description& d) {
  if (d.steps.empty()) {
    return {.fault = ensemble_fault::no_steps};
  }
  if (auto p = detail::check_names(d)) {
    return p;
  }
  for (std::size_t s = 0; s < d.steps.size(); ++s) {
    if (auto p = detail::check_step_mappings(d.steps[s], s)) {
      return p;
    }
  }
  if (auto p = detail::check_connections(d)) {
    return p;
  }
  if (auto p = detail::check_acyclic(d)) {
    return p;
  }
  return detail::check_types(d);
}

/// A sentence naming what is wrong: which step (and its model), which tensor, what it expects.
[[nodiscard]] inline std::string describe(const ensemble_problem& p, const ensemble_description& d,
                                          std::string_view ensemble_name) {
  const auto q = [](std::string_view s) { return "'" + std::string{s} + "'"; };
  const auto step_name = [&](std::size_t s) {
    return "step " + std::to_string(s) + " (model " + q(d.steps[s].model) + ")";
  };
  const auto spec_text = [](const tensor_declaration& spec) {
    return std::string{to_string(spec.type)} + " " + to_string(spec.dims);
  };
  std::string out = "ensemble " + q(ensemble_name) + ": ";
  switch (p.fault) {
  case ensemble_fault::none:
    return out + "no problem";
  case ensemble_fault::no_steps:
    return out + "needs at least one step";
  case ensemble_fault::duplicate_name:
    return out + "tensor " + q(p.tensor) + " is listed twice among its inputs and outputs";
  case ensemble_fault::undeclared_model_tensor:
    return out + step_name(p.step) + " maps " + (p.output_side ? "output " : "input ") +
           q(p.tensor) + ", which its model does not declare";
  case ensemble_fault::model_tensor_mapped_twice:
    return out + step_name(p.step) + " maps model " + (p.output_side ? "output " : "input ") +
           q(p.tensor) + " more than once";
  case ensemble_fault::unmapped_model_input:
    return out + step_name(p.step) + " does not map model input " + q(p.tensor);
  case ensemble_fault::two_producers:
    return out + "tensor " + q(p.tensor) + " is written by " + step_name(p.step) + " and by " +
           (p.peer == ensemble_peer::ensemble_input ? std::string{"the ensemble input"}
                                                    : step_name(p.peer_step)) +
           "; a tensor has one producer";
  case ensemble_fault::unprovided_tensor:
    return out + step_name(p.step) + " input " +
           q(d.steps[p.step].input_map[p.mapping].model_tensor) + " reads tensor " + q(p.tensor) +
           ", which no ensemble input and no step output provides";
  case ensemble_fault::unproduced_output:
    return out + "output " + q(p.tensor) + " is not produced by any step";
  case ensemble_fault::unused_input:
    return out + "input " + q(p.tensor) + " is not read by any step";
  case ensemble_fault::cycle:
    if (p.step == ensemble_problem::npos) {
      return out + "its steps form a cycle";
    }
    return out + "its steps form a cycle: " + step_name(p.step) + " reads tensor " + q(p.tensor) +
           " from " + step_name(p.peer_step) + ", which depends on it";
  case ensemble_fault::type_mismatch:
  case ensemble_fault::dims_mismatch: {
    const bool types = p.fault == ensemble_fault::type_mismatch;
    const auto what = types ? std::string{"data type"} : std::string{"shape"};
    if (p.peer == ensemble_peer::ensemble_output) {
      const auto produced = detail::find_spec(d.steps[p.step].declared_outputs,
                                              d.steps[p.step].output_map[p.mapping].model_tensor);
      const auto declared = detail::find_spec(d.declared_outputs, p.tensor);
      return out + "output " + q(p.tensor) + " has inconsistent " + what + ": " +
             step_name(p.step) + " produces " + spec_text(*produced) + ", the ensemble declares " +
             spec_text(*declared);
    }
    const auto& c = d.steps[p.step];
    const auto consumed = detail::find_spec(c.declared_inputs, c.input_map[p.mapping].model_tensor);
    const auto provided = detail::provider_spec(d, p.tensor);
    std::string from;
    if (p.peer == ensemble_peer::ensemble_input) {
      from = "the ensemble input declares ";
    } else if (provided.source.kind == ensemble_peer::step &&
               detail::contains(d.inputs, p.tensor)) {
      from = step_name(p.peer_step) + " reads it as ";
    } else {
      from = step_name(p.peer_step) + " produces ";
    }
    return out + "tensor " + q(p.tensor) + " has inconsistent " + what + ": " + from +
           spec_text(*provided.spec) + ", " + step_name(p.step) + " input " +
           q(c.input_map[p.mapping].model_tensor) + " expects " + spec_text(*consumed);
  }
  }
  return out + "unknown problem";
}

} // namespace servekit
