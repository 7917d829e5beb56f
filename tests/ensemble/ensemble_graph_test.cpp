// The ensemble graph checks as plain data (find_problem, describe, dims_compatible), at compile
// time where they can run there, and as they run at load (detail::build_plan): one graph per
// fault, the messages users read, and the plan of a valid ensemble.
#include <servekit/core/config_error.hpp>
#include <servekit/ensemble/detail/ensemble_plan.hpp>
#include <servekit/ensemble/ensemble_graph.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ensemble_graph_test {

using servekit::batch_dim;
using servekit::config_error;
using servekit::config_error_code;
using servekit::data_type;
using servekit::ensemble_description;
using servekit::ensemble_fault;
using servekit::ensemble_peer;
using servekit::ensemble_problem;
using servekit::find_problem;
using servekit::shape;
using servekit::step_description;
using servekit::tensor_config;
using servekit::tensor_declaration;
using servekit::tensor_mapping;
using servekit::detail::batch_adaptation;
using servekit::detail::build_plan;
using servekit::detail::composing_model_info;
using servekit::detail::ensemble_layout;
using servekit::detail::ensemble_plan;
using servekit::detail::no_index;

constexpr std::size_t npos = ensemble_problem::npos;

// ---------------------------------------------------------------------------------------------
// Hand-built graphs. Most are a two-step chain, IMAGE -> pre -> "mid" -> cls -> RESULT, with one
// thing changed; the arrays live at namespace scope so that their spans are constant.
// ---------------------------------------------------------------------------------------------
constexpr tensor_declaration fp32_in[] = {{"IN", data_type::fp32, {4}}};
constexpr tensor_declaration fp32_out[] = {{"OUT", data_type::fp32, {4}}};
constexpr tensor_declaration int32_in[] = {{"IN", data_type::int32, {4}}};
constexpr tensor_declaration fp32_in_5[] = {{"IN", data_type::fp32, {5}}};
constexpr tensor_declaration in_and_mask[] = {{"IN", data_type::fp32, {4}},
                                              {"MASK", data_type::fp32, {4}}};
constexpr tensor_declaration in_and_optional_mask[] = {
    {"IN", data_type::fp32, {4}}, {"MASK", data_type::fp32, {4}, false, /*optional=*/true}};

constexpr std::string_view image[] = {"IMAGE"};
constexpr std::string_view image_and_mask[] = {"IMAGE", "MASK"};
constexpr std::string_view image_twice[] = {"IMAGE", "IMAGE"};
constexpr std::string_view result[] = {"RESULT"};
constexpr std::string_view result_twice[] = {"RESULT", "RESULT"};
constexpr std::string_view result_and_extra[] = {"RESULT", "EXTRA"};

constexpr tensor_mapping in_from_image[] = {{"IN", "IMAGE"}};
constexpr tensor_mapping in_from_mid[] = {{"IN", "mid"}};
constexpr tensor_mapping out_to_mid[] = {{"OUT", "mid"}};
constexpr tensor_mapping out_to_result[] = {{"OUT", "RESULT"}};

/// A step with every field given (aggregate initialisation would warn about the defaulted ones).
constexpr step_description make_step(std::string_view model, std::span<const tensor_mapping> reads,
                                     std::span<const tensor_mapping> writes,
                                     std::span<const tensor_declaration> inputs,
                                     std::span<const tensor_declaration> outputs,
                                     batch_dim batching = batch_dim::unknown,
                                     bool decoupled = false) {
  return {.model = model,
          .input_map = reads,
          .output_map = writes,
          .declared_inputs = inputs,
          .declared_outputs = outputs,
          .batching = batching,
          .decoupled = decoupled};
}

/// An ensemble with every field given; it declares nothing of its own unless told.
constexpr ensemble_description
make_graph(std::span<const std::string_view> inputs, std::span<const std::string_view> outputs,
           std::span<const step_description> steps,
           std::span<const tensor_declaration> declared_inputs = {},
           std::span<const tensor_declaration> declared_outputs = {}) {
  return {.inputs = inputs,
          .outputs = outputs,
          .steps = steps,
          .declared_inputs = declared_inputs,
          .declared_outputs = declared_outputs,
          .batching = batch_dim::unknown};
}

/// The chain's two steps; each graph below swaps in what it changes.
constexpr step_description pre = make_step("pre", in_from_image, out_to_mid, fp32_in, fp32_out);
constexpr step_description cls = make_step("cls", in_from_mid, out_to_result, fp32_in, fp32_out);

namespace valid {
constexpr step_description steps[] = {pre, cls};
constexpr ensemble_description d = make_graph(image, result, steps);
static_assert(!find_problem(d));
} // namespace valid

namespace no_steps {
constexpr ensemble_description d = make_graph(image, result, {});
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::no_steps && problem.step == npos);
} // namespace no_steps

namespace duplicate_input {
constexpr step_description steps[] = {pre, cls};
constexpr ensemble_description d = make_graph(image_twice, result, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::duplicate_name && problem.tensor == "IMAGE");
} // namespace duplicate_input

namespace input_also_output {
constexpr step_description steps[] = {pre, cls};
constexpr ensemble_description d = make_graph(image, image, steps);
static_assert(find_problem(d).fault == ensemble_fault::duplicate_name);
} // namespace input_also_output

namespace duplicate_output {
constexpr step_description steps[] = {pre, cls};
constexpr ensemble_description d = make_graph(image, result_twice, steps);
static_assert(find_problem(d).fault == ensemble_fault::duplicate_name);
static_assert(find_problem(d).tensor == "RESULT");
} // namespace duplicate_output

namespace decoupled {
constexpr step_description steps[] = {pre, make_step("stream", in_from_mid, out_to_result, fp32_in,
                                                     fp32_out, batch_dim::unknown, true)};
constexpr ensemble_description d = make_graph(image, result, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::none); // decoupled steps are legal
} // namespace decoupled

namespace undeclared_input {
constexpr tensor_mapping reads[] = {{"INPUT", "IMAGE"}};
constexpr step_description steps[] = {make_step("pre", reads, out_to_mid, fp32_in, fp32_out), cls};
constexpr ensemble_description d = make_graph(image, result, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::undeclared_model_tensor);
static_assert(problem.step == 0 && problem.mapping == 0 && !problem.output_side);
static_assert(problem.tensor == "INPUT");
} // namespace undeclared_input

namespace undeclared_output {
constexpr tensor_mapping writes[] = {{"OUTPUT", "RESULT"}};
constexpr step_description steps[] = {pre,
                                      make_step("cls", in_from_mid, writes, fp32_in, fp32_out)};
constexpr ensemble_description d = make_graph(image, result, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::undeclared_model_tensor);
static_assert(problem.step == 1 && problem.mapping == 0 && problem.output_side);
static_assert(problem.tensor == "OUTPUT");
} // namespace undeclared_output

namespace nothing_declared {
// A model that declares nothing is not checked: any names, any types.
constexpr tensor_mapping reads[] = {{"ANYTHING", "mid"}};
constexpr tensor_mapping writes[] = {{"WHATEVER", "RESULT"}};
constexpr step_description steps[] = {pre, make_step("opaque", reads, writes, {}, {})};
constexpr ensemble_description d = make_graph(image, result, steps);
static_assert(!find_problem(d));
} // namespace nothing_declared

namespace mapped_twice {
constexpr tensor_mapping reads[] = {{"IN", "IMAGE"}, {"IN", "MASK"}};
constexpr step_description steps[] = {make_step("pre", reads, out_to_mid, fp32_in, fp32_out), cls};
constexpr ensemble_description d = make_graph(image_and_mask, result, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::model_tensor_mapped_twice);
static_assert(problem.step == 0 && problem.mapping == 1 && problem.tensor == "IN");
} // namespace mapped_twice

namespace unmapped_input {
constexpr step_description steps[] = {
    make_step("pre", in_from_image, out_to_mid, in_and_mask, fp32_out), cls};
constexpr ensemble_description d = make_graph(image, result, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::unmapped_model_input);
static_assert(problem.step == 0 && problem.mapping == npos && problem.tensor == "MASK");
} // namespace unmapped_input

namespace unmapped_optional_input {
constexpr step_description steps[] = {
    make_step("pre", in_from_image, out_to_mid, in_and_optional_mask, fp32_out), cls};
constexpr ensemble_description d = make_graph(image, result, steps);
static_assert(!find_problem(d));
} // namespace unmapped_optional_input

namespace two_step_producers {
constexpr step_description steps[] = {
    make_step("left", in_from_image, out_to_result, fp32_in, fp32_out),
    make_step("right", in_from_image, out_to_result, fp32_in, fp32_out)};
constexpr ensemble_description d = make_graph(image, result, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::two_producers);
static_assert(problem.step == 1 && problem.mapping == 0 && problem.output_side);
static_assert(problem.tensor == "RESULT" && problem.peer == ensemble_peer::step);
static_assert(problem.peer_step == 0 && problem.peer_mapping == 0);
} // namespace two_step_producers

namespace step_writes_an_input {
constexpr tensor_mapping writes[] = {{"OUT", "RESULT"}, {"AUX", "IMAGE"}};
constexpr tensor_declaration outs[] = {{"OUT", data_type::fp32, {4}},
                                       {"AUX", data_type::fp32, {4}}};
constexpr step_description steps[] = {make_step("pre", in_from_image, writes, fp32_in, outs)};
constexpr ensemble_description d = make_graph(image, result, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::two_producers);
static_assert(problem.step == 0 && problem.mapping == 1 && problem.tensor == "IMAGE");
static_assert(problem.peer == ensemble_peer::ensemble_input && problem.peer_step == npos);
} // namespace step_writes_an_input

namespace unprovided {
constexpr tensor_mapping reads[] = {{"FORMATTED_IMAGE", "preprocessed_image"}};
constexpr tensor_declaration formatted[] = {{"FORMATTED_IMAGE", data_type::fp32, {4}}};
constexpr step_description steps[] = {
    make_step("preprocess", in_from_image, out_to_mid, fp32_in, fp32_out),
    make_step("classify", reads, out_to_result, formatted, fp32_out)};
constexpr std::string_view outputs[] = {"RESULT", "mid"};
constexpr ensemble_description d = make_graph(image, outputs, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::unprovided_tensor);
static_assert(problem.step == 1 && problem.mapping == 0 && !problem.output_side);
static_assert(problem.tensor == "preprocessed_image");
} // namespace unprovided

namespace unproduced {
constexpr step_description steps[] = {pre, cls};
constexpr ensemble_description d = make_graph(image, result_and_extra, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::unproduced_output);
static_assert(problem.step == npos && problem.tensor == "EXTRA");
} // namespace unproduced

namespace unused {
constexpr step_description steps[] = {pre, cls};
constexpr ensemble_description d = make_graph(image_and_mask, result, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::unused_input);
static_assert(problem.step == npos && problem.tensor == "MASK");
} // namespace unused

namespace cycle {
// merge reads IMAGE and STATE; update reads merge's "mid" and writes STATE.
constexpr tensor_mapping merge_reads[] = {{"IN", "IMAGE"}, {"MASK", "STATE"}};
constexpr tensor_mapping update_writes[] = {{"OUT", "STATE"}};
constexpr std::string_view state[] = {"STATE"};
constexpr step_description steps[] = {
    make_step("merge", merge_reads, out_to_mid, in_and_mask, fp32_out),
    make_step("update", in_from_mid, update_writes, fp32_in, fp32_out)};
constexpr ensemble_description d = make_graph(image, state, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::cycle);
static_assert(problem.step == 0 && problem.mapping == 1 && problem.tensor == "STATE");
static_assert(problem.peer == ensemble_peer::step && problem.peer_step == 1);
static_assert(problem.peer_mapping == 0);
} // namespace cycle

namespace type_between_steps {
constexpr step_description steps[] = {
    pre, make_step("cls", in_from_mid, out_to_result, int32_in, fp32_out)};
constexpr ensemble_description d = make_graph(image, result, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::type_mismatch);
static_assert(problem.step == 1 && problem.mapping == 0 && problem.tensor == "mid");
static_assert(problem.peer == ensemble_peer::step && problem.peer_step == 0);
static_assert(problem.peer_mapping == 0);
} // namespace type_between_steps

namespace type_of_declared_input {
constexpr tensor_declaration declared[] = {{"IMAGE", data_type::int32, {4}}};
constexpr step_description steps[] = {pre, cls};
constexpr ensemble_description d = make_graph(image, result, steps, declared, {});
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::type_mismatch);
static_assert(problem.step == 0 && problem.mapping == 0 && problem.tensor == "IMAGE");
static_assert(problem.peer == ensemble_peer::ensemble_input);
} // namespace type_of_declared_input

namespace type_of_declared_output {
constexpr tensor_declaration declared[] = {{"RESULT", data_type::fp16, {4}}};
constexpr step_description steps[] = {pre, cls};
constexpr ensemble_description d = make_graph(image, result, steps, {}, declared);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::type_mismatch);
static_assert(problem.step == 1 && problem.mapping == 0 && problem.output_side);
static_assert(problem.tensor == "RESULT" && problem.peer == ensemble_peer::ensemble_output);
} // namespace type_of_declared_output

namespace dims_between_steps {
constexpr step_description steps[] = {
    pre, make_step("cls", in_from_mid, out_to_result, fp32_in_5, fp32_out)};
constexpr ensemble_description d = make_graph(image, result, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::dims_mismatch);
static_assert(problem.step == 1 && problem.mapping == 0 && problem.tensor == "mid");
static_assert(problem.peer == ensemble_peer::step && problem.peer_step == 0);
} // namespace dims_between_steps

namespace dims_between_readers {
// IMAGE is not declared: its first reader sets what the others must agree with.
constexpr std::string_view outputs[] = {"RESULT", "mid"};
constexpr step_description steps[] = {
    pre, make_step("cls", in_from_image, out_to_result, fp32_in_5, fp32_out)};
constexpr ensemble_description d = make_graph(image, outputs, steps);
constexpr ensemble_problem problem = find_problem(d);
static_assert(problem.fault == ensemble_fault::dims_mismatch);
static_assert(problem.step == 1 && problem.tensor == "IMAGE");
static_assert(problem.peer == ensemble_peer::step && problem.peer_step == 0);
} // namespace dims_between_readers

namespace batch_dims {
// pre batches and writes [4]; flat does not batch and reads [-1, 4] (or [4]).
constexpr tensor_declaration any_by_4_in[] = {{"IN", data_type::fp32, {-1, 4}}};
constexpr tensor_declaration any_by_4_out[] = {{"OUT", data_type::fp32, {-1, 4}}};
constexpr step_description batching_pre =
    make_step("pre", in_from_image, out_to_mid, fp32_in, fp32_out, batch_dim::present);
constexpr step_description flat =
    make_step("flat", in_from_mid, out_to_result, any_by_4_in, any_by_4_out, batch_dim::absent);
constexpr step_description steps[] = {batching_pre, flat};
constexpr ensemble_description d = make_graph(image, result, steps);
static_assert(!find_problem(d));
// The other way round: a non-batching [-1, 4] feeds a batching [4].
constexpr step_description flat_first =
    make_step("flat", in_from_image, out_to_mid, any_by_4_in, any_by_4_out, batch_dim::absent);
constexpr step_description batching_cls =
    make_step("cls", in_from_mid, out_to_result, fp32_in, fp32_out, batch_dim::present);
constexpr step_description reversed_steps[] = {flat_first, batching_cls};
constexpr ensemble_description reversed = make_graph(image, result, reversed_steps);
static_assert(!find_problem(reversed));
} // namespace batch_dims

/// Runs find_problem at run time as well, so that a failure prints the fields.
ensemble_problem at_run_time(const ensemble_description& d) { return find_problem(d); }

TEST(EnsembleGraph, AValidChainHasNoProblem) {
  const auto p = at_run_time(valid::d);
  EXPECT_FALSE(p);
  EXPECT_EQ(p.fault, ensemble_fault::none);
  EXPECT_FALSE(at_run_time(nothing_declared::d));
  EXPECT_FALSE(at_run_time(unmapped_optional_input::d));
}

TEST(EnsembleGraph, NoSteps) {
  const auto p = at_run_time(no_steps::d);
  EXPECT_EQ(p.fault, ensemble_fault::no_steps);
  EXPECT_EQ(p.step, npos);
}

TEST(EnsembleGraph, DuplicateNames) {
  EXPECT_EQ(at_run_time(duplicate_input::d).fault, ensemble_fault::duplicate_name);
  EXPECT_EQ(at_run_time(duplicate_input::d).tensor, "IMAGE");
  EXPECT_EQ(at_run_time(input_also_output::d).fault, ensemble_fault::duplicate_name);
  EXPECT_EQ(at_run_time(input_also_output::d).tensor, "IMAGE");
  EXPECT_EQ(at_run_time(duplicate_output::d).fault, ensemble_fault::duplicate_name);
  EXPECT_EQ(at_run_time(duplicate_output::d).tensor, "RESULT");
}

TEST(EnsembleGraph, DecoupledStepIsLegal) {
  EXPECT_EQ(at_run_time(decoupled::d).fault, ensemble_fault::none);
}

TEST(EnsembleGraph, UndeclaredModelTensorOnEitherSide) {
  const auto in = at_run_time(undeclared_input::d);
  EXPECT_EQ(in.fault, ensemble_fault::undeclared_model_tensor);
  EXPECT_EQ(in.step, 0U);
  EXPECT_EQ(in.mapping, 0U);
  EXPECT_FALSE(in.output_side);
  EXPECT_EQ(in.tensor, "INPUT");

  const auto out = at_run_time(undeclared_output::d);
  EXPECT_EQ(out.fault, ensemble_fault::undeclared_model_tensor);
  EXPECT_EQ(out.step, 1U);
  EXPECT_EQ(out.mapping, 0U);
  EXPECT_TRUE(out.output_side);
  EXPECT_EQ(out.tensor, "OUTPUT");
}

TEST(EnsembleGraph, ModelTensorMappedTwice) {
  const auto p = at_run_time(mapped_twice::d);
  EXPECT_EQ(p.fault, ensemble_fault::model_tensor_mapped_twice);
  EXPECT_EQ(p.step, 0U);
  EXPECT_EQ(p.mapping, 1U);
  EXPECT_EQ(p.tensor, "IN");
}

TEST(EnsembleGraph, UnmappedRequiredModelInput) {
  const auto p = at_run_time(unmapped_input::d);
  EXPECT_EQ(p.fault, ensemble_fault::unmapped_model_input);
  EXPECT_EQ(p.step, 0U);
  EXPECT_EQ(p.mapping, npos);
  EXPECT_EQ(p.tensor, "MASK");
}

TEST(EnsembleGraph, TwoProducers) {
  const auto steps = at_run_time(two_step_producers::d);
  EXPECT_EQ(steps.fault, ensemble_fault::two_producers);
  EXPECT_EQ(steps.step, 1U);
  EXPECT_EQ(steps.mapping, 0U);
  EXPECT_TRUE(steps.output_side);
  EXPECT_EQ(steps.tensor, "RESULT");
  EXPECT_EQ(steps.peer, ensemble_peer::step);
  EXPECT_EQ(steps.peer_step, 0U);
  EXPECT_EQ(steps.peer_mapping, 0U);

  const auto input = at_run_time(step_writes_an_input::d);
  EXPECT_EQ(input.fault, ensemble_fault::two_producers);
  EXPECT_EQ(input.step, 0U);
  EXPECT_EQ(input.mapping, 1U);
  EXPECT_EQ(input.tensor, "IMAGE");
  EXPECT_EQ(input.peer, ensemble_peer::ensemble_input);
}

TEST(EnsembleGraph, UnprovidedTensor) {
  const auto p = at_run_time(unprovided::d);
  EXPECT_EQ(p.fault, ensemble_fault::unprovided_tensor);
  EXPECT_EQ(p.step, 1U);
  EXPECT_EQ(p.mapping, 0U);
  EXPECT_FALSE(p.output_side);
  EXPECT_EQ(p.tensor, "preprocessed_image");
}

TEST(EnsembleGraph, UnproducedOutputAndUnusedInput) {
  const auto out = at_run_time(unproduced::d);
  EXPECT_EQ(out.fault, ensemble_fault::unproduced_output);
  EXPECT_EQ(out.step, npos);
  EXPECT_EQ(out.tensor, "EXTRA");

  const auto in = at_run_time(unused::d);
  EXPECT_EQ(in.fault, ensemble_fault::unused_input);
  EXPECT_EQ(in.step, npos);
  EXPECT_EQ(in.tensor, "MASK");
}

TEST(EnsembleGraph, Cycle) {
  const auto p = at_run_time(cycle::d);
  EXPECT_EQ(p.fault, ensemble_fault::cycle);
  EXPECT_EQ(p.step, 0U);
  EXPECT_EQ(p.mapping, 1U);
  EXPECT_EQ(p.tensor, "STATE");
  EXPECT_EQ(p.peer, ensemble_peer::step);
  EXPECT_EQ(p.peer_step, 1U);
  EXPECT_EQ(p.peer_mapping, 0U);
}

TEST(EnsembleGraph, TypeMismatchWithAStepTheEnsembleInputOrTheEnsembleOutput) {
  const auto steps = at_run_time(type_between_steps::d);
  EXPECT_EQ(steps.fault, ensemble_fault::type_mismatch);
  EXPECT_EQ(steps.step, 1U);
  EXPECT_EQ(steps.mapping, 0U);
  EXPECT_EQ(steps.tensor, "mid");
  EXPECT_EQ(steps.peer, ensemble_peer::step);
  EXPECT_EQ(steps.peer_step, 0U);

  const auto input = at_run_time(type_of_declared_input::d);
  EXPECT_EQ(input.fault, ensemble_fault::type_mismatch);
  EXPECT_EQ(input.step, 0U);
  EXPECT_EQ(input.tensor, "IMAGE");
  EXPECT_EQ(input.peer, ensemble_peer::ensemble_input);

  const auto output = at_run_time(type_of_declared_output::d);
  EXPECT_EQ(output.fault, ensemble_fault::type_mismatch);
  EXPECT_EQ(output.step, 1U);
  EXPECT_TRUE(output.output_side);
  EXPECT_EQ(output.tensor, "RESULT");
  EXPECT_EQ(output.peer, ensemble_peer::ensemble_output);
}

TEST(EnsembleGraph, DimsMismatch) {
  const auto steps = at_run_time(dims_between_steps::d);
  EXPECT_EQ(steps.fault, ensemble_fault::dims_mismatch);
  EXPECT_EQ(steps.step, 1U);
  EXPECT_EQ(steps.tensor, "mid");
  EXPECT_EQ(steps.peer_step, 0U);

  const auto readers = at_run_time(dims_between_readers::d);
  EXPECT_EQ(readers.fault, ensemble_fault::dims_mismatch);
  EXPECT_EQ(readers.step, 1U);
  EXPECT_EQ(readers.tensor, "IMAGE");
  EXPECT_EQ(readers.peer_step, 0U);
}

TEST(EnsembleGraph, BatchingAndNonBatchingStepsAgreeAboutTheBatchDimension) {
  EXPECT_FALSE(at_run_time(batch_dims::d));
  EXPECT_FALSE(at_run_time(batch_dims::reversed));
}

TEST(EnsembleGraph, DimsCompatibleAllowsForTheBatchDimension) {
  using servekit::detail::dims_compatible;
  constexpr auto present = batch_dim::present;
  constexpr auto absent = batch_dim::absent;
  constexpr auto unknown = batch_dim::unknown;
  // Equal dims, and -1 against anything of the same rank.
  static_assert(dims_compatible(shape{4}, present, shape{4}, present));
  static_assert(dims_compatible(shape{-1, 4}, absent, shape{7, 4}, absent));
  static_assert(!dims_compatible(shape{4}, present, shape{5}, present));
  static_assert(!dims_compatible(shape{4}, unknown, shape{5}, unknown));
  // A batching [4] is [batch, 4]: a non-batching [-1, 4] takes it, and the other way round.
  static_assert(dims_compatible(shape{4}, present, shape{-1, 4}, absent));
  static_assert(dims_compatible(shape{-1, 4}, absent, shape{4}, present));
  // ... but not when the batching side is the one with the extra dim.
  static_assert(!dims_compatible(shape{-1, 4}, present, shape{4}, absent));
  static_assert(!dims_compatible(shape{4}, absent, shape{-1, 4}, present));
  // Both batching, or both not: no adaptation.
  static_assert(!dims_compatible(shape{4}, present, shape{-1, 4}, present));
  static_assert(!dims_compatible(shape{4}, absent, shape{-1, 4}, absent));
  // Unknown batching (compile time, no fixed max_batch_size) is lenient either way.
  static_assert(dims_compatible(shape{4}, unknown, shape{-1, 4}, unknown));
  static_assert(dims_compatible(shape{-1, 4}, unknown, shape{4}, unknown));
  static_assert(dims_compatible(shape{4}, present, shape{-1, 4}, unknown));
  static_assert(dims_compatible(shape{-1, 4}, unknown, shape{4}, present));

  EXPECT_TRUE(dims_compatible(shape{4}, present, shape{-1, 4}, absent));
  EXPECT_FALSE(dims_compatible(shape{4}, present, shape{5}, absent));
  EXPECT_TRUE(dims_compatible(shape{-1, 4}, unknown, shape{4}, unknown));
}

TEST(EnsembleGraph, DescribeNamesTheEnsembleTheStepItsModelAndTheTensor) {
  using servekit::describe;
  EXPECT_EQ(describe(at_run_time(unprovided::d), unprovided::d, "E"),
            "ensemble 'E': step 1 (model 'classify') input 'FORMATTED_IMAGE' reads tensor "
            "'preprocessed_image', which no ensemble input and no step output provides");
  EXPECT_EQ(describe(at_run_time(type_between_steps::d), type_between_steps::d, "E"),
            "ensemble 'E': tensor 'mid' has inconsistent data type: step 0 (model 'pre') produces "
            "FP32 [4], step 1 (model 'cls') input 'IN' expects INT32 [4]");
  EXPECT_EQ(describe(at_run_time(dims_between_steps::d), dims_between_steps::d, "E"),
            "ensemble 'E': tensor 'mid' has inconsistent shape: step 0 (model 'pre') produces "
            "FP32 [4], step 1 (model 'cls') input 'IN' expects FP32 [5]");
  EXPECT_EQ(describe(at_run_time(dims_between_readers::d), dims_between_readers::d, "E"),
            "ensemble 'E': tensor 'IMAGE' has inconsistent shape: step 0 (model 'pre') reads it "
            "as FP32 [4], step 1 (model 'cls') input 'IN' expects FP32 [5]");
  EXPECT_EQ(describe(at_run_time(type_of_declared_input::d), type_of_declared_input::d, "E"),
            "ensemble 'E': tensor 'IMAGE' has inconsistent data type: the ensemble input declares "
            "INT32 [4], step 0 (model 'pre') input 'IN' expects FP32 [4]");
  EXPECT_EQ(describe(at_run_time(type_of_declared_output::d), type_of_declared_output::d, "E"),
            "ensemble 'E': output 'RESULT' has inconsistent data type: step 1 (model 'cls') "
            "produces FP32 [4], the ensemble declares FP16 [4]");
  EXPECT_EQ(describe(at_run_time(cycle::d), cycle::d, "E"),
            "ensemble 'E': its steps form a cycle: step 0 (model 'merge') reads tensor 'STATE' "
            "from step 1 (model 'update'), which depends on it");
  EXPECT_EQ(describe(at_run_time(two_step_producers::d), two_step_producers::d, "E"),
            "ensemble 'E': tensor 'RESULT' is written by step 1 (model 'right') and by step 0 "
            "(model 'left'); a tensor has one producer");
  EXPECT_EQ(describe(at_run_time(undeclared_input::d), undeclared_input::d, "E"),
            "ensemble 'E': step 0 (model 'pre') maps input 'INPUT', which its model does not "
            "declare");
  EXPECT_EQ(describe(at_run_time(unmapped_input::d), unmapped_input::d, "E"),
            "ensemble 'E': step 0 (model 'pre') does not map model input 'MASK'");
  EXPECT_EQ(describe(at_run_time(unused::d), unused::d, "E"),
            "ensemble 'E': input 'MASK' is not read by any step");
  EXPECT_EQ(describe(at_run_time(unproduced::d), unproduced::d, "E"),
            "ensemble 'E': output 'EXTRA' is not produced by any step");
  EXPECT_EQ(describe(at_run_time(valid::d), valid::d, "E"), "ensemble 'E': no problem");
}

// ---------------------------------------------------------------------------------------------
// build_plan: the same checks at load, with the composing models as configured.
// ---------------------------------------------------------------------------------------------

tensor_config config(std::string name, data_type type, shape dims) {
  return {std::move(name), type, dims, false, false, false};
}

composing_model_info model(std::string name, std::int32_t max_batch_size,
                           std::vector<tensor_config> inputs, std::vector<tensor_config> outputs) {
  composing_model_info m;
  m.name = std::move(name);
  m.max_batch_size = max_batch_size;
  m.inputs = std::move(inputs);
  m.outputs = std::move(outputs);
  return m;
}

ensemble_layout::step layout_step(std::vector<std::pair<std::string, std::string>> input_map,
                                  std::vector<std::pair<std::string, std::string>> output_map) {
  ensemble_layout::step s;
  s.input_map = std::move(input_map);
  s.output_map = std::move(output_map);
  return s;
}

/// IMAGE -> preprocess -> preprocessed_image -> classify -> CLASSIFICATION.
ensemble_layout classify_pipeline() {
  ensemble_layout l;
  l.name = "E";
  l.inputs = {"IMAGE"};
  l.outputs = {"CLASSIFICATION"};
  l.steps.push_back(
      layout_step({{"RAW_IMAGE", "IMAGE"}}, {{"PREPROCESSED_OUTPUT", "preprocessed_image"}}));
  l.steps.push_back(layout_step({{"FORMATTED_IMAGE", "preprocessed_image"}},
                                {{"CLASSIFICATION_OUTPUT", "CLASSIFICATION"}}));
  return l;
}

composing_model_info preprocess_model(std::int32_t max_batch_size = 8) {
  return model("preprocess", max_batch_size, {config("RAW_IMAGE", data_type::fp32, {4})},
               {config("PREPROCESSED_OUTPUT", data_type::fp32, {4})});
}

composing_model_info classify_model(data_type input_type = data_type::fp32,
                                    std::int32_t max_batch_size = 8) {
  return model("classify", max_batch_size, {config("FORMATTED_IMAGE", input_type, {4})},
               {config("CLASSIFICATION_OUTPUT", data_type::fp32, {4})});
}

/// The config_error build_plan throws, or a failure if it throws none.
config_error load_error(const ensemble_layout& layout, std::vector<composing_model_info> models) {
  try {
    (void)build_plan(layout, std::move(models));
  } catch (const config_error& e) {
    return e;
  }
  ADD_FAILURE() << "build_plan accepted ensemble '" << layout.name << "'";
  return config_error{config_error_code::bad_value, "", "no error"};
}

TEST(EnsembleLoadChecks, UnprovidedTensorNamesTheStepInputMapEntry) {
  auto layout = classify_pipeline();
  layout.steps[0].output_map = {{"PREPROCESSED_OUTPUT", "prepped"}};
  layout.outputs.push_back("prepped"); // keep step 0's output used
  const auto e = load_error(layout, {preprocess_model(), classify_model()});
  EXPECT_EQ(e.code(), config_error_code::bad_value);
  EXPECT_EQ(e.path(), "/ensemble_scheduling/step/1/input_map/FORMATTED_IMAGE");
  EXPECT_STREQ(e.what(), "/ensemble_scheduling/step/1/input_map/FORMATTED_IMAGE: ensemble 'E': "
                         "step 1 (model 'classify') input 'FORMATTED_IMAGE' reads tensor "
                         "'preprocessed_image', which no ensemble input and no step output "
                         "provides");
}

TEST(EnsembleLoadChecks, TypeMismatchNamesBothSides) {
  const auto e =
      load_error(classify_pipeline(), {preprocess_model(), classify_model(data_type::int32)});
  EXPECT_EQ(e.code(), config_error_code::bad_value);
  EXPECT_EQ(e.path(), "/ensemble_scheduling/step/1/input_map/FORMATTED_IMAGE");
  EXPECT_STREQ(e.what(), "/ensemble_scheduling/step/1/input_map/FORMATTED_IMAGE: ensemble 'E': "
                         "tensor 'preprocessed_image' has inconsistent data type: step 0 (model "
                         "'preprocess') produces FP32 [4], step 1 (model 'classify') input "
                         "'FORMATTED_IMAGE' expects INT32 [4]");
}

TEST(EnsembleLoadChecks, UndeclaredOutputNamesTheOutputMapEntry) {
  auto layout = classify_pipeline();
  layout.steps[1].output_map = {{"CLASS", "CLASSIFICATION"}};
  const auto e = load_error(layout, {preprocess_model(), classify_model()});
  EXPECT_EQ(e.path(), "/ensemble_scheduling/step/1/output_map/CLASS");
  EXPECT_NE(std::string{e.what()}.find("maps output 'CLASS', which its model does not declare"),
            std::string::npos)
      << e.what();
}

TEST(EnsembleLoadChecks, EnsembleWideProblemsPointAtEnsembleScheduling) {
  auto layout = classify_pipeline();
  layout.inputs.push_back("MASK");
  const auto e = load_error(layout, {preprocess_model(), classify_model()});
  EXPECT_EQ(e.path(), "/ensemble_scheduling");
  EXPECT_STREQ(e.what(),
               "/ensemble_scheduling: ensemble 'E': input 'MASK' is not read by any step");
}

TEST(EnsembleLoadChecks, MaxBatchSizeLargerThanAComposingModels) {
  auto layout = classify_pipeline();
  layout.max_batch_size = 16;
  auto small = classify_model(data_type::fp32, 8);
  small.name = "M";
  const auto e = load_error(layout, {preprocess_model(16), std::move(small)});
  EXPECT_EQ(e.code(), config_error_code::bad_value);
  EXPECT_EQ(e.path(), "/max_batch_size");
  EXPECT_STREQ(e.what(), "/max_batch_size: ensemble 'E' allows maximum batch size 16, but it "
                         "contains model 'M' which only allows maximum batch size to be 8");
}

TEST(EnsembleLoadChecks, NonBatchingModelsDoNotLimitTheMaxBatchSize) {
  auto layout = classify_pipeline();
  layout.max_batch_size = 16;
  // classify does not batch and reads [-1, 4]: allowed next to a batching ensemble.
  auto flat = model("classify", 0, {config("FORMATTED_IMAGE", data_type::fp32, {-1, 4})},
                    {config("CLASSIFICATION_OUTPUT", data_type::fp32, {-1, 4})});
  const auto plan = build_plan(layout, {preprocess_model(16), std::move(flat)});
  EXPECT_EQ(plan.max_batch_size, 16);
}

TEST(EnsembleLoadChecks, NegativeMaxBatchSize) {
  auto layout = classify_pipeline();
  layout.max_batch_size = -1;
  const auto e = load_error(layout, {preprocess_model(), classify_model()});
  EXPECT_EQ(e.path(), "/max_batch_size");
}

TEST(EnsembleLoadChecks, ExactBatchingRefusesWhatCompileTimeLeniencyAccepts) {
  // preprocess batches and writes [-1, 4], i.e. [batch, -1, 4]; classify does not batch and
  // reads [4]. With batching unknown this passes; at load it is a shape mismatch.
  auto producer = model("preprocess", 8, {config("RAW_IMAGE", data_type::fp32, {4})},
                        {config("PREPROCESSED_OUTPUT", data_type::fp32, {-1, 4})});
  const auto e =
      load_error(classify_pipeline(), {std::move(producer), classify_model(data_type::fp32, 0)});
  EXPECT_EQ(e.path(), "/ensemble_scheduling/step/1/input_map/FORMATTED_IMAGE");
  EXPECT_NE(std::string{e.what()}.find("has inconsistent shape"), std::string::npos) << e.what();
}

TEST(EnsembleLoadChecks, DerivesMaxBatchSizeAndDeclarations) {
  const auto plan =
      build_plan(classify_pipeline(), {preprocess_model(8), classify_model(data_type::fp32, 4)});
  EXPECT_EQ(plan.name, "E");
  EXPECT_EQ(plan.max_batch_size, 4); // the smallest of the batching steps'
  ASSERT_EQ(plan.input_configs.size(), 1U);
  EXPECT_EQ(plan.input_configs[0], config("IMAGE", data_type::fp32, {4}));
  ASSERT_EQ(plan.output_configs.size(), 1U);
  EXPECT_EQ(plan.output_configs[0], config("CLASSIFICATION", data_type::fp32, {4}));
  EXPECT_EQ(plan.order, (std::vector<std::size_t>{0, 1}));

  // A non-batching step makes the derived max_batch_size 0.
  auto flat = model("classify", 0, {config("FORMATTED_IMAGE", data_type::fp32, {-1, 4})},
                    {config("CLASSIFICATION_OUTPUT", data_type::fp32, {-1, 4})});
  EXPECT_EQ(build_plan(classify_pipeline(), {preprocess_model(), std::move(flat)}).max_batch_size,
            0);
}

TEST(EnsembleLoadChecks, DeclaredConfigsAreKept) {
  auto layout = classify_pipeline();
  layout.declared_inputs = {config("IMAGE", data_type::fp32, {4})};
  layout.declared_outputs = {config("CLASSIFICATION", data_type::fp32, {4})};
  layout.declared_inputs[0].optional = false;
  const auto plan = build_plan(layout, {preprocess_model(), classify_model()});
  EXPECT_EQ(plan.input_configs, layout.declared_inputs);
  EXPECT_EQ(plan.output_configs, layout.declared_outputs);
}

/// Three steps listed consumer first:
///   0 classify (batches, [4])      reads "flat"    writes CLASSIFICATION
///   1 flatten  (no batch, [-1, 4]) reads "prepped" writes "flat"
///   2 preprocess (batches, [4])    reads IMAGE     writes "prepped"; its DEBUG output is unmapped
ensemble_plan three_step_plan() {
  ensemble_layout l;
  l.name = "E";
  l.inputs = {"IMAGE"};
  l.outputs = {"CLASSIFICATION"};
  l.max_batch_size = 8;
  l.steps.push_back(
      layout_step({{"FORMATTED_IMAGE", "flat"}}, {{"CLASSIFICATION_OUTPUT", "CLASSIFICATION"}}));
  l.steps.push_back(layout_step({{"IN", "prepped"}}, {{"OUT", "flat"}}));
  l.steps.push_back(layout_step({{"RAW_IMAGE", "IMAGE"}}, {{"PREPROCESSED_OUTPUT", "prepped"}}));
  auto flatten = model("flatten", 0, {config("IN", data_type::fp32, {-1, 4})},
                       {config("OUT", data_type::fp32, {-1, 4})});
  auto preprocess = preprocess_model();
  preprocess.outputs.push_back(config("DEBUG", data_type::bytes, {1}));
  return build_plan(l, {classify_model(), std::move(flatten), std::move(preprocess)});
}

TEST(EnsembleLoadChecks, PlanOrdersProducersBeforeTheirReaders) {
  const auto plan = three_step_plan();
  EXPECT_EQ(plan.order, (std::vector<std::size_t>{2, 1, 0}));
  ASSERT_EQ(plan.steps.size(), 3U);
  EXPECT_EQ(plan.steps[0].model.name, "classify");
  EXPECT_EQ(plan.steps[2].model.name, "preprocess");

  const std::size_t prepped = plan.tensor_index("prepped");
  const std::size_t flat = plan.tensor_index("flat");
  ASSERT_NE(prepped, no_index);
  ASSERT_NE(flat, no_index);
  EXPECT_EQ(plan.tensors[prepped].producer, 2U);
  EXPECT_EQ(plan.tensors[flat].producer, 1U);
  ASSERT_EQ(plan.inputs.size(), 1U);
  EXPECT_EQ(plan.tensors[plan.inputs[0]].name, "IMAGE");
  EXPECT_EQ(plan.tensors[plan.inputs[0]].producer, no_index);
  ASSERT_EQ(plan.outputs.size(), 1U);
  EXPECT_EQ(plan.output_position(plan.outputs[0]), 0U);
  EXPECT_EQ(plan.steps[1].input_tensors, (std::vector<std::size_t>{prepped}));
  EXPECT_EQ(plan.steps[1].output_tensors, (std::vector<std::size_t>{flat}));
}

TEST(EnsembleLoadChecks, PlanAdaptsTheBatchDimensionBetweenBatchingAndNonBatchingSteps) {
  const auto plan = three_step_plan();
  // Batching preprocess -> non-batching flatten: drop the batch dim.
  const auto& prepped = plan.tensors[plan.tensor_index("prepped")];
  ASSERT_EQ(prepped.readers.size(), 1U);
  EXPECT_EQ(prepped.readers[0].step, 1U);
  EXPECT_EQ(prepped.readers[0].slot, 0U);
  EXPECT_EQ(prepped.readers[0].adaptation, batch_adaptation::drop_batch);
  ASSERT_TRUE(prepped.readers[0].dims.has_value());
  EXPECT_EQ(*prepped.readers[0].dims, (shape{-1, 4}));
  // Non-batching flatten -> batching classify: add it.
  const auto& flat = plan.tensors[plan.tensor_index("flat")];
  ASSERT_EQ(flat.readers.size(), 1U);
  EXPECT_EQ(flat.readers[0].step, 0U);
  EXPECT_EQ(flat.readers[0].adaptation, batch_adaptation::add_batch);
  EXPECT_EQ(flat.readers[0].dims, shape{4});
  // The batching ensemble's input to a batching step, and a batching step's output to the
  // batching ensemble's response: nothing to adapt.
  const auto& input = plan.tensors[plan.inputs[0]];
  ASSERT_EQ(input.readers.size(), 1U);
  EXPECT_EQ(input.readers[0].adaptation, batch_adaptation::none);
  const auto& classification = plan.tensors[plan.outputs[0]];
  ASSERT_TRUE(classification.output.has_value());
  EXPECT_EQ(classification.output->step, no_index);
  EXPECT_EQ(classification.output->adaptation, batch_adaptation::none);
  EXPECT_TRUE(classification.readers.empty());
}

TEST(EnsembleLoadChecks, PlanRequestsOnlyTheMappedOutputsWhenSomeAreLeftOut) {
  const auto plan = three_step_plan();
  // preprocess declares PREPROCESSED_OUTPUT and DEBUG; only the first is mapped.
  EXPECT_EQ(plan.steps[2].requested_outputs, (std::vector<std::string>{"PREPROCESSED_OUTPUT"}));
  // classify and flatten have every output mapped: ask for everything.
  EXPECT_TRUE(plan.steps[0].requested_outputs.empty());
  EXPECT_TRUE(plan.steps[1].requested_outputs.empty());
  EXPECT_EQ(plan.steps[2].output_names, (std::vector<std::string>{"PREPROCESSED_OUTPUT"}));
}

TEST(EnsembleLoadChecks, PlanDerivesTheEnsembleDeclarationsFromItsSteps) {
  const auto plan = three_step_plan();
  EXPECT_EQ(plan.max_batch_size, 8);
  ASSERT_EQ(plan.input_configs.size(), 1U);
  EXPECT_EQ(plan.input_configs[0], config("IMAGE", data_type::fp32, {4}));
  ASSERT_EQ(plan.output_configs.size(), 1U);
  EXPECT_EQ(plan.output_configs[0], config("CLASSIFICATION", data_type::fp32, {4}));
}

} // namespace ensemble_graph_test
