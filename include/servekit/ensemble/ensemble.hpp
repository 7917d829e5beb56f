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

/// A name as a template argument: up to 63 characters of a `std::string_view` (fixed_string's
/// size is part of its type, which a name computed by the checks cannot choose).
struct tensor_name {
  char value[64]{};
  constexpr tensor_name(std::string_view s) noexcept { // NOLINT: implicit by design
    for (std::size_t i = 0; i < s.size() && i + 1 < sizeof value; ++i) {
      value[i] = s[i];
    }
  }
  [[nodiscard]] constexpr std::size_t size() const noexcept {
    std::size_t n = 0;
    while (value[n] != '\0') {
      ++n;
    }
    return n;
  }
};

} // namespace detail

/// The compile-time checks of an ensemble, one class template per fault: the failing check is
/// the first thing either compiler prints, its name says what is wrong and its arguments say
/// where, e.g. `step_input_reads_a_tensor_nothing_provides<step<1, model<classify_backend>>,
/// model_tensor<"FORMATTED_IMAGE">, tensor<"preprocessed_image">>`.
namespace ensemble_check {

#if defined(__clang__)
// clang (14 at least) prints a class-type template argument's characters as numbers, but a
// `char` argument as a character: there a name is a pack of them, tensor<'I', 'N', '0'>.
template <char... C>
struct tensor {};
template <char... C>
struct model_tensor {};
template <template <char...> class Kind, detail::tensor_name N, std::size_t... I>
auto spell(std::index_sequence<I...> /*chars*/) -> Kind<N.value[I]...>;
template <template <char...> class Kind, detail::tensor_name N>
using spelled = decltype(spell<Kind, N>(std::make_index_sequence<N.size()>{}));
#else
// GCC prints a class-type template argument holding characters as a string:
// tensor<tensor_name{"IN0"}>.
template <detail::tensor_name N>
struct tensor {};
template <detail::tensor_name N>
struct model_tensor {};
template <template <detail::tensor_name> class Kind, detail::tensor_name N>
using spelled = Kind<N>;
#endif

/// The step at fault: its index in ensemble<...> and its model (the ensemble itself: -1, void).
template <int Index, class Model>
struct step {};

template <class... Where>
inline constexpr bool fails = false;

// Each check is instantiated only for the fault found, and fails there.
template <class... Where>
struct ensemble_has_no_steps {
  static_assert(fails<Where...>, "servekit: an ensemble needs at least one step");
};
template <class Tensor>
struct tensor_listed_twice_among_ensemble_inputs_and_outputs {
  static_assert(fails<Tensor>, "servekit: ensemble: a tensor is listed twice among the "
                               "ensemble's inputs and outputs (the tensor: above)");
};
template <class Step, class ModelTensor>
struct step_maps_a_tensor_its_model_does_not_declare {
  static_assert(fails<Step, ModelTensor>,
                "servekit: ensemble: a step maps a model tensor that its model does not declare "
                "(the step, its model and the tensor: above; see the backend's inputs/outputs)");
};
template <class Step, class ModelTensor>
struct step_maps_a_model_tensor_twice {
  static_assert(fails<Step, ModelTensor>, "servekit: ensemble: a step maps a model tensor more "
                                          "than once (the step, its model and the tensor: above)");
};
template <class Step, class ModelTensor>
struct step_does_not_map_a_required_model_input {
  static_assert(fails<Step, ModelTensor>,
                "servekit: ensemble: a step does not map a required input of its model (the "
                "step, its model and the input: above)");
};
template <class Tensor, class Step, class OtherStep>
struct tensor_has_two_producers {
  static_assert(fails<Tensor, Step, OtherStep>,
                "servekit: ensemble: a tensor has two producers, two steps or a step and an "
                "ensemble input (step<-1, void>); a tensor has one producer");
};
template <class Step, class ModelTensor, class Tensor>
struct step_input_reads_a_tensor_nothing_provides {
  static_assert(fails<Step, ModelTensor, Tensor>,
                "servekit: ensemble: a step input reads a tensor that no ensemble input and no "
                "step output provides (the step, its model, the input and the tensor: above)");
};
template <class Tensor>
struct ensemble_output_not_produced_by_any_step {
  static_assert(fails<Tensor>,
                "servekit: ensemble: an output of the ensemble is not produced by any step");
};
template <class Tensor>
struct ensemble_input_not_read_by_any_step {
  static_assert(fails<Tensor>,
                "servekit: ensemble: an input of the ensemble is not read by any step");
};
template <class Step, class Tensor, class OtherStep>
struct steps_form_a_cycle {
  static_assert(fails<Step, Tensor, OtherStep>,
                "servekit: ensemble: the steps form a cycle: the first step reads the tensor "
                "from the other step, which depends on it");
};
template <class Tensor, class Producer, class Step, class ModelTensor>
struct tensor_data_type_differs_between_producer_and_step_input {
  static_assert(fails<Tensor, Producer, Step, ModelTensor>,
                "servekit: ensemble: a tensor has one data type where it is provided (step<-1, "
                "void>: the ensemble input) and another at a step's input");
};
template <class Tensor, class Producer, class Step, class ModelTensor>
struct tensor_dims_differ_between_producer_and_step_input {
  static_assert(fails<Tensor, Producer, Step, ModelTensor>,
                "servekit: ensemble: a tensor has incompatible dims where it is provided "
                "(step<-1, void>: the ensemble input) and at a step's input");
};

} // namespace ensemble_check

namespace detail {

/// The model of step `I` of `Models...`, void for npos (the ensemble itself).
template <std::size_t I, class... Models>
struct model_at {
  using type = std::tuple_element_t<I, std::tuple<Models...>>;
};
template <class... Models>
struct model_at<ensemble_problem::npos, Models...> {
  using type = void;
};

/// Instantiates the check of `Problem`'s fault, with its step, model and tensor names (already
/// spelled for the compiler: ensemble_check::tensor<...>, ensemble_check::model_tensor<...>).
template <ensemble_fault Problem, int Step, class Model, class NamedTensor, class NamedModelTensor,
          int OtherStep, class OtherModel>
consteval bool report_ensemble_problem() {
  namespace ec = ensemble_check;
  using enum ensemble_fault;
  using at = ec::step<Step, Model>;
  using other = ec::step<OtherStep, OtherModel>;
  using named_tensor = NamedTensor;
  using named_model_tensor = NamedModelTensor;
  if constexpr (Problem == no_steps) {
    return sizeof(ec::ensemble_has_no_steps<at>) == 0;
  } else if constexpr (Problem == duplicate_name) {
    return sizeof(ec::tensor_listed_twice_among_ensemble_inputs_and_outputs<named_tensor>) == 0;
  } else if constexpr (Problem == undeclared_model_tensor) {
    return sizeof(ec::step_maps_a_tensor_its_model_does_not_declare<at, named_model_tensor>) == 0;
  } else if constexpr (Problem == model_tensor_mapped_twice) {
    return sizeof(ec::step_maps_a_model_tensor_twice<at, named_model_tensor>) == 0;
  } else if constexpr (Problem == unmapped_model_input) {
    return sizeof(ec::step_does_not_map_a_required_model_input<at, named_model_tensor>) == 0;
  } else if constexpr (Problem == two_producers) {
    return sizeof(ec::tensor_has_two_producers<named_tensor, at, other>) == 0;
  } else if constexpr (Problem == unprovided_tensor) {
    return sizeof(ec::step_input_reads_a_tensor_nothing_provides<at, named_model_tensor,
                                                                 named_tensor>) == 0;
  } else if constexpr (Problem == unproduced_output) {
    return sizeof(ec::ensemble_output_not_produced_by_any_step<named_tensor>) == 0;
  } else if constexpr (Problem == unused_input) {
    return sizeof(ec::ensemble_input_not_read_by_any_step<named_tensor>) == 0;
  } else if constexpr (Problem == cycle) {
    return sizeof(ec::steps_form_a_cycle<at, named_tensor, other>) == 0;
  } else if constexpr (Problem == type_mismatch) {
    return sizeof(ec::tensor_data_type_differs_between_producer_and_step_input<
                  named_tensor, other, at, named_model_tensor>) == 0;
  } else if constexpr (Problem == dims_mismatch) {
    return sizeof(ec::tensor_dims_differ_between_producer_and_step_input<named_tensor, other, at,
                                                                         named_model_tensor>) == 0;
  } else {
    return true;
  }
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
  static constexpr bool checked = report_ensemble_problem<
      problem.fault, as_int(problem.step),
      typename model_at<problem.step, typename Steps::model_type...>::type,
      ensemble_check::spelled<ensemble_check::tensor, tensor_name{problem.tensor}>,
      ensemble_check::spelled<ensemble_check::model_tensor, tensor_name{model_tensor()}>,
      as_int(problem.peer_step),
      typename model_at<problem.peer_step, typename Steps::model_type...>::type>();

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
