// Compile-time checks of the backend concept and its traits: if this compiles, it passed.
#include "archetypes/minimal_backend.hpp"

#include <servekit/backend/backend.hpp>

#include <cstdint>
#include <type_traits>

namespace {

static_assert(servekit::backend<archetypes::minimal_backend>);
static_assert(servekit::check_backend<archetypes::minimal_backend>());

// Defaults for a backend that declares nothing optional.
using minimal = servekit::backend_traits<archetypes::minimal_backend>;
static_assert(minimal::max_batch_size == 0);
static_assert(minimal::batching);
static_assert(!minimal::decoupled);
static_assert(minimal::inputs.empty() && minimal::outputs.empty());

// Backends written against the old name still compile (with a deprecation warning).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
using old_name = servekit::tensor_spec; // deprecated alias of tensor_declaration
#pragma GCC diagnostic pop
static_assert(std::is_same_v<old_name, servekit::tensor_declaration>);

struct declared {
  static constexpr std::int32_t max_batch_size = 16;
  static constexpr bool decoupled = true;
  static constexpr servekit::tensor_declaration inputs[] = {
      {"IN", servekit::data_type::int32, {-1}}};
  static constexpr servekit::tensor_declaration outputs[] = {
      {"OUT", servekit::data_type::int32, {-1}}, {"LEN", servekit::data_type::int64, {1}}};
  explicit declared(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};
using declared_traits = servekit::backend_traits<declared>;
static_assert(declared_traits::max_batch_size == 16);
static_assert(declared_traits::decoupled);
static_assert(declared_traits::inputs.size() == 1 && declared_traits::outputs.size() == 2);
static_assert(declared_traits::inputs[0].name == "IN");
static_assert(declared_traits::outputs[1].type == servekit::data_type::int64);

// What is not a backend.
struct no_execute {
  explicit no_execute(const servekit::instance_context&) {}
};
struct no_context_constructor {
  void execute(servekit::batch&) {}
};
struct execute_takes_the_wrong_argument {
  explicit execute_takes_the_wrong_argument(const servekit::instance_context&) {}
  void execute(int) {}
};
static_assert(!servekit::backend<no_execute>);
static_assert(!servekit::backend<no_context_constructor>);
static_assert(!servekit::backend<execute_takes_the_wrong_argument>);

// A user may specialise the traits for a class they cannot change.
struct third_party {
  explicit third_party(const servekit::instance_context&) {}
  void execute(servekit::batch&) {}
};

} // namespace

template <>
struct servekit::backend_traits<third_party> {
  static constexpr std::int32_t max_batch_size = 4;
  static constexpr bool batching = true;
  static constexpr bool decoupled = false;
  static constexpr std::span<const tensor_declaration> inputs{};
  static constexpr std::span<const tensor_declaration> outputs{};
};
static_assert(servekit::backend_traits<third_party>::max_batch_size == 4);
