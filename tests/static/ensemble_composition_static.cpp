// Compile-time checks of ensemble<inputs<...>, outputs<...>, step<...>...>: valid pipelines,
// nesting, and the batch dimension between batching and non-batching steps. If this compiles,
// it passed; tests/compile_fail/ensemble_*.cpp hold the graphs that must not compile.
#include <servekit/ensemble/ensemble.hpp>
#include <servekit/ensemble/ensemble_graph.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_ref.hpp>

#include <cstdint>
#include <string_view>

namespace {

using servekit::data_type;
using servekit::in;
using servekit::out;
using servekit::step;

/// FP32 [4] in, FP32 [4] out, as most steps below; MaxBatch 0 means "does not batch".
template <servekit::fixed_string In, servekit::fixed_string Out, std::int32_t MaxBatch = 8>
struct vector_backend {
  static constexpr std::int32_t max_batch_size = MaxBatch;
  static constexpr servekit::tensor_declaration inputs[] = {{In.view(), data_type::fp32, {4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{Out.view(), data_type::fp32, {4}}};
  explicit vector_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

// A valid pipeline: one preprocessing step fanning out to two readers.
using preprocess = servekit::model<vector_backend<"RAW_IMAGE", "PREPROCESSED_OUTPUT">>;
using classify = servekit::model<vector_backend<"FORMATTED_IMAGE", "CLASSIFICATION_OUTPUT">>;
using segment = servekit::model<vector_backend<"FORMATTED_IMAGE", "SEGMENTATION_OUTPUT">>;

using pipeline = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"CLASSIFICATION", "SEGMENTATION">,
    step<preprocess, in<"RAW_IMAGE", "IMAGE">, out<"PREPROCESSED_OUTPUT", "preprocessed_image">>,
    step<classify, in<"FORMATTED_IMAGE", "preprocessed_image">,
         out<"CLASSIFICATION_OUTPUT", "CLASSIFICATION">>,
    step<segment, in<"FORMATTED_IMAGE", "preprocessed_image">,
         out<"SEGMENTATION_OUTPUT", "SEGMENTATION">>>;

static_assert(sizeof(pipeline) > 0);
static_assert(servekit::servable<pipeline>);
static_assert(!pipeline::traits::decoupled);
static_assert(pipeline::traits::inputs.size() == 1 && pipeline::traits::outputs.size() == 2);
static_assert(pipeline::traits::inputs[0].name == "IMAGE");
static_assert(pipeline::traits::outputs[1].name == "SEGMENTATION");
static_assert(pipeline::traits::outputs[1].dims == servekit::shape{4});

// A decoupled step is legal, and makes the ensemble decoupled (it streams one response per
// iteration), as does a decoupled ensemble used as a step.
template <servekit::fixed_string In, servekit::fixed_string Out>
struct streaming_backend : vector_backend<In, Out, 0> {
  static constexpr bool decoupled = true;
  using vector_backend<In, Out, 0>::vector_backend;
};
using generate = servekit::model<streaming_backend<"PROMPT_IDS", "TOKEN">>;
using detokenize = servekit::model<vector_backend<"TOKEN_ID", "TEXT", 0>>;
using chat = servekit::ensemble<servekit::inputs<"PROMPT">, servekit::outputs<"TEXT">,
                                step<generate, in<"PROMPT_IDS", "PROMPT">, out<"TOKEN", "token">>,
                                step<detokenize, in<"TOKEN_ID", "token">, out<"TEXT", "TEXT">>>;
static_assert(servekit::servable<chat>);
static_assert(chat::traits::decoupled);
using chat_twice =
    servekit::ensemble<servekit::inputs<"PROMPT">, servekit::outputs<"TEXT">,
                       step<chat, in<"PROMPT", "PROMPT">, out<"TEXT", "text">>,
                       step<detokenize, in<"TOKEN_ID", "text">, out<"TEXT", "TEXT">>>;
static_assert(chat_twice::traits::decoupled);

// A nested ensemble: `tokenizer` is an ensemble, used as a step of `embedder`. Its traits are
// derived from its steps, with their data types, and the enclosing ensemble checks against them.
struct tokenize_backend {
  static constexpr servekit::tensor_declaration inputs[] = {{"TEXT", data_type::bytes, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"TOKEN_IDS", data_type::int64, {-1}}};
  explicit tokenize_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
struct embed_backend {
  static constexpr servekit::tensor_declaration inputs[] = {{"IDS", data_type::int64, {-1}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"EMBEDDING", data_type::fp16, {-1, 768}}};
  explicit embed_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

using tokenizer = servekit::ensemble<
    servekit::inputs<"PROMPT">, servekit::outputs<"IDS">,
    step<servekit::model<tokenize_backend>, in<"TEXT", "PROMPT">, out<"TOKEN_IDS", "IDS">>>;
static_assert(servekit::servable<tokenizer>);
static_assert(tokenizer::traits::inputs.size() == 1 && tokenizer::traits::outputs.size() == 1);
static_assert(tokenizer::traits::inputs[0].name == "PROMPT");
static_assert(tokenizer::traits::inputs[0].type == data_type::bytes);
static_assert(tokenizer::traits::inputs[0].dims == servekit::shape{1});
static_assert(tokenizer::traits::outputs[0].name == "IDS");
static_assert(tokenizer::traits::outputs[0].type == data_type::int64);
static_assert(tokenizer::traits::outputs[0].dims == servekit::shape{-1});

using embedder = servekit::ensemble<
    servekit::inputs<"QUERY">, servekit::outputs<"EMBEDDING">,
    step<tokenizer, in<"PROMPT", "QUERY">, out<"IDS", "query_ids">>,
    step<servekit::model<embed_backend>, in<"IDS", "query_ids">, out<"EMBEDDING", "EMBEDDING">>>;
static_assert(sizeof(embedder) > 0);
static_assert(servekit::servable<embedder>);
// Two levels down, the outer ensemble's declarations still carry the innermost step's types.
static_assert(embedder::traits::inputs[0].name == "QUERY");
static_assert(embedder::traits::inputs[0].type == data_type::bytes);
static_assert(embedder::traits::outputs[0].type == data_type::fp16);
static_assert(embedder::traits::outputs[0].dims == servekit::shape{-1, 768});

// Batch dimension: a batching producer's [4] (each request [batch, 4]) feeds a non-batching
// consumer declaring [-1, 4]; Triton accepts this, and so does the compile-time check.
struct flatten_backend {
  static constexpr std::int32_t max_batch_size = 0; // does not batch
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", data_type::fp32, {-1, 4}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUT", data_type::fp32, {-1, 4}}};
  explicit flatten_backend(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
using batching_to_non_batching = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"FLAT">,
    step<preprocess, in<"RAW_IMAGE", "IMAGE">, out<"PREPROCESSED_OUTPUT", "prepped">>,
    step<servekit::model<flatten_backend>, in<"IN", "prepped">, out<"OUT", "FLAT">>>;
static_assert(sizeof(batching_to_non_batching) > 0);
static_assert(servekit::servable<batching_to_non_batching>);

// ... and the reverse: the non-batching producer's [-1, 4] feeds a batching reader of [4].
using non_batching_to_batching = servekit::ensemble<
    servekit::inputs<"IMAGE">, servekit::outputs<"CLASSIFICATION">,
    step<servekit::model<flatten_backend>, in<"IN", "IMAGE">, out<"OUT", "flat">>,
    step<classify, in<"FORMATTED_IMAGE", "flat">, out<"CLASSIFICATION_OUTPUT", "CLASSIFICATION">>>;
static_assert(sizeof(non_batching_to_batching) > 0);

// The same graph with the batching known exactly, as a configured ensemble checks it at load:
// accepted in both directions, and refused when the batching side declares the [-1] itself.
constexpr servekit::tensor_declaration batching_out[] = {{"OUT", data_type::fp32, {4}}};
constexpr servekit::tensor_declaration batching_in[] = {{"IN", data_type::fp32, {4}}};
constexpr servekit::tensor_declaration non_batching_out[] = {{"OUT", data_type::fp32, {-1, 4}}};
constexpr servekit::tensor_declaration non_batching_in[] = {{"IN", data_type::fp32, {-1, 4}}};
constexpr std::string_view ensemble_inputs[] = {"IMAGE"};
constexpr std::string_view ensemble_outputs[] = {"RESULT"};
constexpr servekit::tensor_mapping first_reads[] = {{"IN", "IMAGE"}};
constexpr servekit::tensor_mapping first_writes[] = {{"OUT", "mid"}};
constexpr servekit::tensor_mapping second_reads[] = {{"IN", "mid"}};
constexpr servekit::tensor_mapping second_writes[] = {{"OUT", "RESULT"}};

constexpr servekit::ensemble_fault
two_step_fault(std::span<const servekit::tensor_declaration> first_in,
               std::span<const servekit::tensor_declaration> first_out, servekit::batch_dim first,
               std::span<const servekit::tensor_declaration> second_in,
               std::span<const servekit::tensor_declaration> second_out,
               servekit::batch_dim second) {
  const servekit::step_description steps[] = {
      {"first", first_reads, first_writes, first_in, first_out, first, false},
      {"second", second_reads, second_writes, second_in, second_out, second, false}};
  const servekit::ensemble_description d{ensemble_inputs, ensemble_outputs, steps, {}, {}, {}};
  return servekit::find_problem(d).fault;
}

using enum servekit::batch_dim;
using enum servekit::ensemble_fault;
static_assert(two_step_fault(batching_in, batching_out, present, non_batching_in, non_batching_out,
                             absent) == none);
static_assert(two_step_fault(non_batching_in, non_batching_out, absent, batching_in, batching_out,
                             present) == none);
// A batching producer of [-1, 4] makes [batch, -1, 4]: a non-batching [4] reader cannot take it.
static_assert(two_step_fault(non_batching_in, non_batching_out, present, batching_in, batching_out,
                             absent) == dims_mismatch);

} // namespace
