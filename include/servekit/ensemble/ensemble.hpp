#pragma once
/// \file
/// ensemble<inputs<...>, outputs<...>, step<...>...>: a pipeline of models composed at compile
/// time. The compiler checks its graph (Triton checks the same at model load); at run time the
/// shared ensemble_executor sends each step to its composing model's own scheduler.
///
///     using pipeline = servekit::ensemble<
///         servekit::inputs<"IMAGE">, servekit::outputs<"CLASSIFICATION", "SEGMENTATION">,
///         servekit::step<preprocess, servekit::in<"RAW_IMAGE", "IMAGE">,
///                        servekit::out<"PREPROCESSED_OUTPUT", "preprocessed_image">>,
///         servekit::step<classify, servekit::in<"FORMATTED_IMAGE", "preprocessed_image">,
///                        servekit::out<"CLASSIFICATION_OUTPUT", "CLASSIFICATION">>,
///         servekit::step<segment, servekit::in<"FORMATTED_IMAGE", "preprocessed_image">,
///                        servekit::out<"SEGMENTATION_OUTPUT", "SEGMENTATION">>>;
///
///     pipeline p{{.name = "pipeline"}, pre, cls, seg}; // the composing models, one per step
///     auto response = p.infer(std::move(request)).get();

#include <servekit/core/fixed_string.hpp>
#include <servekit/ensemble/detail/ensemble_plan.hpp>
#include <servekit/ensemble/ensemble_executor.hpp>
#include <servekit/ensemble/ensemble_graph.hpp>
#include <servekit/metrics/ensemble_statistics.hpp>
#include <servekit/runtime/detail/infer.hpp>
#include <servekit/runtime/model_ref.hpp>
#include <servekit/runtime/shutdown_mode.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace servekit {

/// The ensemble's input tensors, by name.
template <fixed_string... Names>
struct inputs {
  static constexpr std::array<std::string_view, sizeof...(Names)> names{Names.view()...};
};

/// The ensemble's output tensors, by name.
template <fixed_string... Names>
struct outputs {
  static constexpr std::array<std::string_view, sizeof...(Names)> names{Names.view()...};
};

/// A step input: the composing model's input `ModelInput` reads ensemble tensor `Tensor`
/// (Triton's input_map entry).
template <fixed_string ModelInput, fixed_string Tensor>
struct in {
  static constexpr bool reads = true;
  static constexpr tensor_mapping mapping{ModelInput.view(), Tensor.view()};
};

/// A step output: the composing model's output `ModelOutput` becomes ensemble tensor `Tensor`
/// (Triton's output_map entry). Outputs not listed are dropped.
template <fixed_string ModelOutput, fixed_string Tensor>
struct out {
  static constexpr bool reads = false;
  static constexpr tensor_mapping mapping{ModelOutput.view(), Tensor.view()};
};

namespace detail {
template <class T>
concept tensor_map_entry = requires {
  { T::reads } -> std::convertible_to<bool>;
  { T::mapping } -> std::convertible_to<tensor_mapping>;
};

template <bool Reads, class... Maps>
consteval auto mappings_of() {
  constexpr std::size_t n = ((Maps::reads == Reads ? 1U : 0U) + ... + 0U);
  std::array<tensor_mapping, n> out{};
  std::size_t i = 0;
  ((Maps::reads == Reads ? (out[i++] = Maps::mapping, 0) : 0), ...);
  return out;
}
} // namespace detail

/// One step: a composing model (a `model<...>`, another ensemble, any servable) and how its
/// tensors map to the ensemble's.
template <class Model, class... Maps>
struct step {
  static_assert((detail::tensor_map_entry<Maps> && ...),
                "servekit: step<Model, Maps...>: each map must be servekit::in<\"MODEL_INPUT\", "
                "\"tensor\"> or servekit::out<\"MODEL_OUTPUT\", \"tensor\">");
  using model_type = Model;
  static constexpr auto input_map = detail::mappings_of<true, Maps...>();
  static constexpr auto output_map = detail::mappings_of<false, Maps...>();
};

/// An ensemble's run-time settings (Triton's names).
struct ensemble_options {
  std::string name = "ensemble";
  std::int64_t version = 1;
  /// Largest batch a request may carry; unset: the smallest of the composing models' when all
  /// batch, else 0. Must not exceed any batching composing model's.
  std::optional<std::int32_t> max_batch_size = std::nullopt;
  /// Most in-flight requests per step, across all requests (0: unlimited).
  std::uint32_t max_inflight_requests = 0;
};

namespace detail {

template <class T>
inline constexpr bool is_inputs = false;
template <fixed_string... N>
inline constexpr bool is_inputs<inputs<N...>> = true;
template <class T>
inline constexpr bool is_outputs = false;
template <fixed_string... N>
inline constexpr bool is_outputs<outputs<N...>> = true;
template <class T>
inline constexpr bool is_step = false;
template <class M, class... Maps>
inline constexpr bool is_step<step<M, Maps...>> = true;

/// A name as a template argument, so that a failed check prints it: `tensor_name{"prepped"}`.
struct tensor_name {
  char value[64]{};
  constexpr tensor_name(std::string_view s) noexcept { // NOLINT: implicit by design
    for (std::size_t i = 0; i < s.size() && i + 1 < sizeof value; ++i) {
      value[i] = s[i];
    }
  }
};

/// One static_assert per fault. The compiler prints this function's template arguments above
/// the message: which step (-1: the ensemble itself), which tensor, which model tensor.
template <ensemble_fault Problem, int Step, tensor_name Tensor, tensor_name ModelTensor,
          int OtherStep>
consteval bool report_ensemble_problem() {
  using enum ensemble_fault;
  static_assert(Problem != no_steps, "servekit: an ensemble needs at least one step");
  static_assert(Problem != duplicate_name,
                "servekit: ensemble: Tensor is listed twice among the ensemble's inputs and "
                "outputs");
  static_assert(Problem != undeclared_model_tensor,
                "servekit: ensemble: step Step maps ModelTensor, which its model does not declare "
                "(see the backend's inputs/outputs)");
  static_assert(Problem != model_tensor_mapped_twice,
                "servekit: ensemble: step Step maps model tensor ModelTensor more than once");
  static_assert(Problem != unmapped_model_input,
                "servekit: ensemble: step Step does not map its model's required input "
                "ModelTensor");
  static_assert(Problem != two_producers,
                "servekit: ensemble: Tensor has two producers: step Step and step OtherStep "
                "(-1: an ensemble input); a tensor has one producer");
  static_assert(Problem != unprovided_tensor,
                "servekit: ensemble: step Step input ModelTensor reads Tensor, which no ensemble "
                "input and no step output provides");
  static_assert(Problem != unproduced_output,
                "servekit: ensemble: output Tensor is not produced by any step");
  static_assert(Problem != unused_input,
                "servekit: ensemble: input Tensor is not read by any step");
  static_assert(Problem != cycle, "servekit: ensemble: the steps form a cycle: step Step reads "
                                  "Tensor from step OtherStep, which depends on it");
  static_assert(Problem != type_mismatch,
                "servekit: ensemble: Tensor has one data type where step OtherStep (-1: the "
                "ensemble input) provides it and another at step Step input ModelTensor");
  static_assert(Problem != dims_mismatch,
                "servekit: ensemble: Tensor has incompatible dims where step OtherStep (-1: the "
                "ensemble input) provides it and at step Step input ModelTensor");
  return true;
}

/// The graph of `ensemble<Inputs, Outputs, Steps...>` as constants, and its check.
template <class Inputs, class Outputs, class... Steps>
struct ensemble_graph_of {
  static constexpr std::array<step_description, sizeof...(Steps)> steps{
      step_description{{},
                       Steps::input_map,
                       Steps::output_map,
                       Steps::model_type::traits::inputs,
                       Steps::model_type::traits::outputs,
                       batch_dim::unknown, // max_batch_size is configuration
                       static_cast<bool>(Steps::model_type::traits::decoupled)}...};
  static constexpr ensemble_description description{
      Inputs::names, Outputs::names, steps, {}, {}, batch_dim::unknown};
  static constexpr ensemble_problem problem = find_problem(description);

  static constexpr int as_int(std::size_t i) noexcept {
    return i == ensemble_problem::npos ? -1 : static_cast<int>(i);
  }
  static constexpr std::string_view model_tensor() noexcept {
    if (problem.step == ensemble_problem::npos || problem.mapping == ensemble_problem::npos) {
      return problem.tensor;
    }
    const auto& s = steps[problem.step];
    return (problem.output_side ? s.output_map : s.input_map)[problem.mapping].model_tensor;
  }
  static constexpr bool checked =
      report_ensemble_problem<problem.fault, as_int(problem.step), tensor_name{problem.tensor},
                              tensor_name{model_tensor()}, as_int(problem.peer_step)>();

  /// Declared specs of the ensemble's own inputs and outputs, taken from the steps on the other
  /// side; all or nothing (an ensemble declares either every tensor or none).
  template <std::size_t N>
  static constexpr auto derive(const std::array<std::string_view, N>& names, bool reading) {
    std::array<tensor_declaration, N> specs{};
    bool complete = true;
    for (std::size_t i = 0; i < N; ++i) {
      std::optional<tensor_declaration> found;
      for (const auto& s : steps) {
        for (const auto& m : reading ? s.input_map : s.output_map) {
          if (!found && m.ensemble_tensor == names[i]) {
            found = find_spec(reading ? s.declared_inputs : s.declared_outputs, m.model_tensor);
          }
        }
      }
      complete = complete && found.has_value();
      if (found) {
        specs[i] = *found;
      }
      specs[i].name = names[i];
    }
    return std::pair{specs, complete};
  }
  static constexpr auto derived_inputs = derive(Inputs::names, true);
  static constexpr auto derived_outputs = derive(Outputs::names, false);
};

template <class Inputs, class Outputs, class... Steps>
consteval bool check_ensemble() {
  static_assert(is_inputs<Inputs>, "servekit: the first argument of ensemble<...> must be "
                                   "servekit::inputs<\"NAME\", ...>");
  static_assert(is_outputs<Outputs>, "servekit: the second argument of ensemble<...> must be "
                                     "servekit::outputs<\"NAME\", ...>");
  static_assert((is_step<Steps> && ...), "servekit: the arguments of ensemble<...> after inputs<> "
                                         "and outputs<> must be servekit::step<Model, ...>");
  if constexpr ((is_step<Steps> && ...)) {
    // One message per missing member of a step's model, before the summary below.
    static_assert((check_servable<typename Steps::model_type>() && ...));
  }
  static_assert((servable<typename Steps::model_type> && ...),
                "servekit: the model of a step must be servable (a servekit::model<...>, an "
                "ensemble, or a class with submit/cancel/name/version/max_batch_size/inputs/"
                "outputs/statistics and a nested traits)");
  if constexpr (is_inputs<Inputs> && is_outputs<Outputs> && (is_step<Steps> && ...) &&
                (servable<typename Steps::model_type> && ...)) {
    return ensemble_graph_of<Inputs, Outputs, Steps...>::checked;
  } else {
    return false;
  }
}

} // namespace detail

/// A pipeline of composing models, checked at compile time (see the file comment). It is itself
/// servable: it can be submitted to, registered by name, and be a step of another ensemble.
/// It holds references to its composing models, which must outlive it (declare them first).
template <class Inputs, class Outputs, class... Steps>
class ensemble;

namespace detail {
/// Sends step `s` to its model: a switch over the steps, no indirect call.
template <class... Models>
struct static_targets {
  std::tuple<Models*...> models;

  status submit(std::size_t s, request&& r, response_sink&& sink) {
    return submit_at(s, std::move(r), std::move(sink), std::index_sequence_for<Models...>{});
  }
  void cancel(cancellation_source& source) {
    std::apply([&](auto*... m) { (m->cancel(source), ...); }, models);
  }

private:
  template <std::size_t... I>
  status submit_at(std::size_t s, request&& r, response_sink&& sink,
                   std::index_sequence<I...> /*steps*/) {
    status out;
    // (void): the fold is for its effect (clang's -Wunused-value otherwise).
    (void)((s == I ? (out = std::get<I>(models)->submit(std::move(r), std::move(sink)), true)
                   : false) ||
           ...);
    return out;
  }
};
} // namespace detail

/// A pipeline of composing models, checked at compile time (see the file comment). It is itself
/// servable: it can be submitted to, registered by name, and be a step of another ensemble.
/// It holds references to its composing models, which must outlive it (declare them first).
///
/// Members (from ensemble_executor): `submit`, `infer`, `cancel`, `shutdown(mode)`,
/// `statistics()` (an `ensemble_statistics`), `name`, `version`, `max_batch_size`, `inputs`,
/// `outputs`, `plan`. The destructor drains.
template <class Inputs, class Outputs, class... Steps>
class ensemble : public ensemble_executor<detail::static_targets<typename Steps::model_type...>> {
  static_assert(detail::check_ensemble<Inputs, Outputs, Steps...>());
  using graph = detail::ensemble_graph_of<Inputs, Outputs, Steps...>;
  using executor = ensemble_executor<detail::static_targets<typename Steps::model_type...>>;

public:
  /// The ensemble's own declarations, derived from its steps' (what an enclosing ensemble checks).
  struct traits {
    static constexpr std::int32_t max_batch_size = 0;
    static constexpr bool batching = true;
    /// Any decoupled step makes the ensemble decoupled: it streams one response per iteration.
    static constexpr bool decoupled =
        (static_cast<bool>(Steps::model_type::traits::decoupled) || ...);
    static constexpr std::span<const tensor_declaration> inputs =
        graph::derived_inputs.second
            ? std::span<const tensor_declaration>{graph::derived_inputs.first}
            : std::span<const tensor_declaration>{};
    static constexpr std::span<const tensor_declaration> outputs =
        graph::derived_outputs.second
            ? std::span<const tensor_declaration>{graph::derived_outputs.first}
            : std::span<const tensor_declaration>{};
  };

  /// The composing models, one per step in order (the same object may serve several steps).
  /// Throws config_error if they do not fit together as configured (e.g. batch sizes).
  explicit ensemble(typename Steps::model_type&... models)
      : ensemble(ensemble_options{}, models...) {}
  ensemble(const ensemble_options& options, typename Steps::model_type&... models)
      : executor{detail::build_plan(
                     layout(options),
                     {detail::composing_info(models, Steps::model_type::traits::decoupled)...}),
                 {{&models...}},
                 options.version,
                 options.max_inflight_requests} {}

private:
  static detail::ensemble_layout layout(const ensemble_options& options) {
    detail::ensemble_layout l;
    l.name = options.name;
    l.inputs.assign(Inputs::names.begin(), Inputs::names.end());
    l.outputs.assign(Outputs::names.begin(), Outputs::names.end());
    const auto add_step = [&](std::span<const tensor_mapping> ins,
                              std::span<const tensor_mapping> outs) {
      auto& s = l.steps.emplace_back();
      for (const auto& m : ins) {
        s.input_map.emplace_back(m.model_tensor, m.ensemble_tensor);
      }
      for (const auto& m : outs) {
        s.output_map.emplace_back(m.model_tensor, m.ensemble_tensor);
      }
    };
    (add_step(Steps::input_map, Steps::output_map), ...);
    l.max_batch_size = options.max_batch_size;
    return l;
  }
};

} // namespace servekit
