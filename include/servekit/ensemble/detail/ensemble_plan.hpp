#pragma once
/// \file
/// ensemble_plan: an ensemble's checked graph turned into indices, built once at construction
/// from the composing models as they were actually configured. Every request runs over it.

#include <servekit/backend/tensor_declaration.hpp>
#include <servekit/core/config_error.hpp>
#include <servekit/core/shape.hpp>
#include <servekit/ensemble/ensemble_graph.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace servekit::detail {

inline constexpr std::size_t no_index = static_cast<std::size_t>(-1);

/// What the ensemble needs to know of a composing model once it is running.
struct composing_model_info {
  std::string name;
  std::int64_t version = 1;
  std::int32_t max_batch_size = 0;
  std::vector<tensor_config> inputs; ///< empty: declares none
  std::vector<tensor_config> outputs;
  bool decoupled = false;
};

/// `configs` if every data type is known, else none: an ensemble that could not derive its
/// declarations declares nothing rather than something wrong.
[[nodiscard]] inline std::vector<tensor_config>
known_configs(std::span<const tensor_config> configs) {
  for (const auto& c : configs) {
    if (c.type == data_type::invalid) {
      return {};
    }
  }
  return {configs.begin(), configs.end()};
}

/// The info of a running servable (a model, an ensemble, a model_ref).
template <class M>
[[nodiscard]] composing_model_info composing_info(const M& m, bool decoupled) {
  return {std::string{m.name()},      m.version(), m.max_batch_size(), known_configs(m.inputs()),
          known_configs(m.outputs()), decoupled};
}

/// How a tensor's shape changes on its way to a reader that disagrees with its producer about
/// the batch dimension (Triton's ReshapeTensorDims).
enum class batch_adaptation : std::uint8_t {
  none,
  add_batch, ///< batching reader, non-batching producer: prepend 1 unless the dims say otherwise
  drop_batch ///< non-batching reader: strip a size-1 batch dim the reader's dims do not allow
};

/// One reader of a tensor: a step's input, or the ensemble's response.
struct tensor_reader {
  std::size_t step = no_index; ///< no_index: the ensemble output
  std::size_t slot = 0;        ///< index into the step's inputs
  batch_adaptation adaptation = batch_adaptation::none;
  std::optional<shape> dims; ///< the reader's declared dims (without batch), if any
};

struct plan_tensor {
  std::string name;
  std::size_t producer = no_index; ///< step; no_index: an ensemble input
  std::size_t produced_as = 0;     ///< index into the producer's outputs
  std::vector<tensor_reader> readers;
  std::optional<tensor_reader> output; ///< set when this is an ensemble output
  /// The decoupled step whose responses this tensor varies with (no_index: one value per
  /// request). A tensor at level D has one value per response of D (an "iteration").
  std::size_t level = no_index;
};

struct plan_step {
  composing_model_info model;
  std::vector<std::string> input_names; ///< model input names, one per input_map entry
  std::vector<std::size_t> input_tensors;
  std::vector<std::size_t> input_readers; ///< per input: its entry in the tensor's `readers`
  std::vector<std::string> output_names;  ///< model output names, one per output_map entry
  std::vector<std::size_t> output_tensors;
  /// What to ask the model for: empty (everything) unless the output_map leaves some out.
  std::vector<std::string> requested_outputs;
  /// The deepest level among its inputs: it runs once per iteration of that level.
  std::size_t level = no_index;
};

/// An ensemble ready to run.
struct ensemble_plan {
  std::string name;
  std::int32_t max_batch_size = 0;
  std::vector<plan_tensor> tensors;
  std::vector<plan_step> steps;
  std::vector<std::size_t> inputs;           ///< tensor per ensemble input
  std::vector<std::size_t> outputs;          ///< tensor per ensemble output
  std::vector<std::size_t> order;            ///< steps, every producer before its readers
  std::vector<tensor_config> input_configs;  ///< declared or derived; type invalid: unknown
  std::vector<tensor_config> output_configs; ///< same
  bool decoupled = false; ///< a step is decoupled: the ensemble streams a response per iteration

  [[nodiscard]] std::size_t tensor_index(std::string_view tensor) const noexcept {
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      if (tensors[t].name == tensor) {
        return t;
      }
    }
    return no_index;
  }
  /// Whether iterations of level `a` contain those of level `b` (a level contains itself; the
  /// request's single iteration, no_index, contains every level).
  [[nodiscard]] bool level_contains(std::size_t a, std::size_t b) const noexcept {
    for (; b != no_index; b = steps[b].level) {
      if (a == b) {
        return true;
      }
    }
    return a == no_index;
  }
  [[nodiscard]] std::size_t output_position(std::size_t tensor) const noexcept {
    const auto it = std::find(outputs.begin(), outputs.end(), tensor);
    return it == outputs.end() ? no_index : static_cast<std::size_t>(it - outputs.begin());
  }
};

/// An ensemble as written by its author: names and maps, before looking at the models.
struct ensemble_layout {
  std::string name;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  struct step {
    std::vector<std::pair<std::string, std::string>> input_map; ///< model tensor, ensemble tensor
    std::vector<std::pair<std::string, std::string>> output_map;
  };
  std::vector<step> steps;
  std::vector<tensor_config> declared_inputs; ///< empty: derive from the steps
  std::vector<tensor_config> declared_outputs;
  std::optional<std::int32_t> max_batch_size; ///< unset: the smallest of the batching steps'
};

[[nodiscard]] inline std::vector<tensor_declaration>
spec_views(std::span<const tensor_config> configs) {
  std::vector<tensor_declaration> out;
  out.reserve(configs.size());
  for (const auto& c : configs) {
    out.push_back({c.name, c.type, c.dims, c.allow_ragged_batch, c.optional, c.is_shape_tensor});
  }
  return out;
}

[[nodiscard]] inline const tensor_config* find_config(std::span<const tensor_config> configs,
                                                      std::string_view name) noexcept {
  for (const auto& c : configs) {
    if (c.name == name) {
      return &c;
    }
  }
  return nullptr;
}

[[nodiscard]] inline tensor_reader make_reader(std::size_t step, std::size_t slot,
                                               bool producer_batches, bool reader_batches,
                                               const tensor_config* reader_config) {
  tensor_reader r{step, slot, batch_adaptation::none, std::nullopt};
  if (reader_config != nullptr) {
    r.dims = reader_config->dims;
  }
  if (reader_batches && !producer_batches) {
    r.adaptation = batch_adaptation::add_batch;
  } else if (!reader_batches && producer_batches) {
    r.adaptation = batch_adaptation::drop_batch;
  }
  return r;
}

/// Works out which decoupled step each tensor and step iterates with (Triton §2.4: every
/// response of a decoupled step is a new iteration downstream). A step reading tensors of two
/// levels where neither contains the other (two independent decoupled streams) is refused: their
/// responses have no pairing (Triton pairs them by arrival index, or refuses them).
inline void assign_levels(ensemble_plan& plan, const std::vector<composing_model_info>& models,
                          const std::string& name) {
  const auto conflict = [&](std::string where, std::string path, std::size_t a, std::size_t b) {
    const auto who = [&](std::size_t s) {
      return "step " + std::to_string(s) + " (model '" + models[s].name + "')";
    };
    throw config_error(config_error_code::bad_value, std::move(path),
                       "ensemble '" + name + "': " + where +
                           " reads tensors streamed by two independent decoupled steps, " + who(a) +
                           " and " + who(b) + "; their responses cannot be paired into iterations");
  };
  for (const std::size_t s : plan.order) {
    auto& step = plan.steps[s];
    std::size_t level = no_index;
    for (const std::size_t t : step.input_tensors) {
      const std::size_t l = plan.tensors[t].level;
      if (plan.level_contains(l, level)) {
        continue; // `level` is as deep or deeper
      }
      if (!plan.level_contains(level, l)) {
        conflict("step " + std::to_string(s) + " (model '" + models[s].name + "')",
                 "/ensemble_scheduling/step/" + std::to_string(s), level, l);
      }
      level = l;
    }
    step.level = level;
    plan.decoupled = plan.decoupled || models[s].decoupled;
    for (const std::size_t t : step.output_tensors) {
      plan.tensors[t].level = models[s].decoupled ? s : level;
    }
  }
  std::size_t level = no_index;
  for (const std::size_t t : plan.outputs) {
    const std::size_t l = plan.tensors[t].level;
    if (plan.level_contains(l, level)) {
      continue;
    }
    if (!plan.level_contains(level, l)) {
      conflict("its response", "/output", level, l);
    }
    level = l;
  }
}

/// Checks `layout` against the composing models as configured (the same checks as at compile
/// time, now with exact batching) and builds the plan. Throws config_error naming the step and
/// tensor at fault.
[[nodiscard]] inline ensemble_plan build_plan(const ensemble_layout& layout,
                                              std::vector<composing_model_info> models) {
  const std::size_t n = layout.steps.size();
  // The graph as the shared checks see it.
  std::vector<std::vector<tensor_mapping>> in_maps(n);
  std::vector<std::vector<tensor_mapping>> out_maps(n);
  std::vector<std::vector<tensor_declaration>> in_specs(n);
  std::vector<std::vector<tensor_declaration>> out_specs(n);
  std::vector<step_description> steps(n);
  for (std::size_t s = 0; s < n; ++s) {
    for (const auto& [m, e] : layout.steps[s].input_map) {
      in_maps[s].push_back({m, e});
    }
    for (const auto& [m, e] : layout.steps[s].output_map) {
      out_maps[s].push_back({m, e});
    }
    in_specs[s] = spec_views(models[s].inputs);
    out_specs[s] = spec_views(models[s].outputs);
    steps[s] = {
        models[s].name,     in_maps[s],
        out_maps[s],        in_specs[s],
        out_specs[s],       models[s].max_batch_size > 0 ? batch_dim::present : batch_dim::absent,
        models[s].decoupled};
  }

  // The ensemble's max_batch_size: at most every batching step's (Triton's rule).
  std::int32_t max_batch = 0;
  if (layout.max_batch_size) {
    max_batch = *layout.max_batch_size;
  } else {
    bool all_batch = true;
    for (const auto& m : models) {
      all_batch = all_batch && m.max_batch_size > 0;
      max_batch = max_batch == 0 ? m.max_batch_size : std::min(max_batch, m.max_batch_size);
    }
    max_batch = all_batch ? max_batch : 0;
  }
  if (max_batch < 0) {
    throw config_error(config_error_code::bad_value, "/max_batch_size",
                       "ensemble '" + layout.name + "' has a negative max_batch_size");
  }
  for (std::size_t s = 0; s < n; ++s) {
    if (models[s].max_batch_size > 0 && models[s].max_batch_size < max_batch) {
      throw config_error(config_error_code::bad_value, "/max_batch_size",
                         "ensemble '" + layout.name + "' allows maximum batch size " +
                             std::to_string(max_batch) + ", but it contains model '" +
                             models[s].name + "' which only allows maximum batch size to be " +
                             std::to_string(models[s].max_batch_size));
    }
  }

  std::vector<std::string_view> input_names(layout.inputs.begin(), layout.inputs.end());
  std::vector<std::string_view> output_names(layout.outputs.begin(), layout.outputs.end());
  const auto declared_in = spec_views(layout.declared_inputs);
  const auto declared_out = spec_views(layout.declared_outputs);
  const ensemble_description d{
      input_names, output_names, steps,
      declared_in, declared_out, max_batch > 0 ? batch_dim::present : batch_dim::absent};
  if (const auto problem = find_problem(d)) {
    std::string path = "/ensemble_scheduling";
    if (problem.step != ensemble_problem::npos) {
      path += "/step/" + std::to_string(problem.step);
      if (problem.mapping != ensemble_problem::npos) {
        const auto& map = problem.output_side ? out_maps[problem.step] : in_maps[problem.step];
        path += (problem.output_side ? "/output_map/" : "/input_map/") +
                std::string{map[problem.mapping].model_tensor};
      }
    }
    throw config_error(config_error_code::bad_value, path, describe(problem, d, layout.name));
  }

  ensemble_plan plan;
  plan.name = layout.name;
  plan.max_batch_size = max_batch;
  const auto tensor_of = [&](const std::string& name) {
    const std::size_t t = plan.tensor_index(name);
    if (t != no_index) {
      return t;
    }
    plan.tensors.push_back({name, no_index, 0, {}, std::nullopt});
    return plan.tensors.size() - 1;
  };
  for (const auto& in : layout.inputs) {
    plan.inputs.push_back(tensor_of(in));
  }
  plan.steps.resize(n);
  for (std::size_t s = 0; s < n; ++s) {
    auto& step = plan.steps[s];
    for (std::size_t m = 0; m < layout.steps[s].output_map.size(); ++m) {
      const auto& [model_tensor, ensemble_tensor] = layout.steps[s].output_map[m];
      const std::size_t t = tensor_of(ensemble_tensor);
      plan.tensors[t].producer = s;
      plan.tensors[t].produced_as = m;
      step.output_names.push_back(model_tensor);
      step.output_tensors.push_back(t);
    }
  }
  const auto batches = [&](std::size_t t) {
    const std::size_t p = plan.tensors[t].producer;
    return p == no_index ? max_batch > 0 : models[p].max_batch_size > 0;
  };
  for (std::size_t s = 0; s < n; ++s) {
    auto& step = plan.steps[s];
    for (const auto& [model_tensor, ensemble_tensor] : layout.steps[s].input_map) {
      const std::size_t t = plan.tensor_index(ensemble_tensor);
      step.input_readers.push_back(plan.tensors[t].readers.size());
      plan.tensors[t].readers.push_back(make_reader(s, step.input_names.size(), batches(t),
                                                    models[s].max_batch_size > 0,
                                                    find_config(models[s].inputs, model_tensor)));
      step.input_names.push_back(model_tensor);
      step.input_tensors.push_back(t);
    }
    if (!models[s].outputs.empty() && step.output_names.size() < models[s].outputs.size()) {
      step.requested_outputs = step.output_names;
    }
  }
  for (const auto& out : layout.outputs) {
    const std::size_t t = plan.tensor_index(out);
    plan.tensors[t].output = make_reader(no_index, 0, batches(t), max_batch > 0,
                                         find_config(layout.declared_outputs, out));
    plan.outputs.push_back(t);
  }

  // Producers before readers (the graph is acyclic: checked above).
  std::vector<bool> placed(n, false);
  while (plan.order.size() < n) {
    for (std::size_t s = 0; s < n; ++s) {
      bool ready = !placed[s];
      for (const auto t : plan.steps[s].input_tensors) {
        const std::size_t p = plan.tensors[t].producer;
        ready = ready && (p == no_index || placed[p]);
      }
      if (ready) {
        placed[s] = true;
        plan.order.push_back(s);
      }
    }
  }

  // Declared, or derived from the models on either side (type invalid when nobody declares).
  for (std::size_t i = 0; i < layout.inputs.size(); ++i) {
    if (const auto* c = find_config(layout.declared_inputs, layout.inputs[i])) {
      plan.input_configs.push_back(*c);
      continue;
    }
    tensor_config derived{layout.inputs[i], data_type::invalid, {}, false, false, false};
    for (const auto& reader : plan.tensors[plan.inputs[i]].readers) {
      const auto& step = plan.steps[reader.step];
      const auto* c = find_config(models[reader.step].inputs, step.input_names[reader.slot]);
      if (c != nullptr && (models[reader.step].max_batch_size > 0) == (max_batch > 0)) {
        derived = *c;
        derived.name = layout.inputs[i];
        break;
      }
    }
    plan.input_configs.push_back(std::move(derived));
  }
  for (std::size_t i = 0; i < layout.outputs.size(); ++i) {
    if (const auto* c = find_config(layout.declared_outputs, layout.outputs[i])) {
      plan.output_configs.push_back(*c);
      continue;
    }
    tensor_config derived{layout.outputs[i], data_type::invalid, {}, false, false, false};
    const auto& t = plan.tensors[plan.outputs[i]];
    const auto* c =
        find_config(models[t.producer].outputs, plan.steps[t.producer].output_names[t.produced_as]);
    if (c != nullptr) {
      derived.type = c->type;
      derived.dims = c->dims;
    }
    plan.output_configs.push_back(std::move(derived));
  }
  assign_levels(plan, models, layout.name);
  for (std::size_t s = 0; s < n; ++s) {
    plan.steps[s].model = std::move(models[s]);
  }
  return plan;
}

/// Applies a reader's batch adaptation to a tensor's shape (a view change: no data moves).
inline void adapt_shape(shape& s, const tensor_reader& reader) noexcept {
  switch (reader.adaptation) {
  case batch_adaptation::none:
    return;
  case batch_adaptation::add_batch:
    if ((!reader.dims || dims_agree(*reader.dims, s)) && s.rank() < shape::max_rank) {
      s = s.with_batch(1);
    }
    return;
  case batch_adaptation::drop_batch:
    if (reader.dims && !dims_agree(*reader.dims, s) && s.rank() > 0 && s[0] == 1) {
      s = s.without_batch();
    }
    return;
  }
}

} // namespace servekit::detail
