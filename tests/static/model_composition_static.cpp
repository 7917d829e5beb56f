// Compile-time checks of model<Backend, Policies...>: policy lookup by role and defaults.
#include "archetypes/minimal_backend.hpp"

#include <servekit/runtime/model.hpp>

#include <type_traits>

namespace {

using archetypes::minimal_backend;

using plain = servekit::model<minimal_backend>;
static_assert(std::is_same_v<plain::scheduler_policy, servekit::default_scheduler>);
static_assert(plain::instance_group_policy::default_count == 1);

using batched =
    servekit::model<minimal_backend, servekit::instance_group<3>, servekit::dynamic_batcher<>>;
static_assert(std::is_same_v<batched::scheduler_policy, servekit::dynamic_batcher<>>);
static_assert(batched::instance_group_policy::default_count == 3);
static_assert(std::is_same_v<batched::core_type, servekit::dynamic_batch_core<>>);

static_assert(servekit::scheduler_core<servekit::dynamic_batch_core<>>);
static_assert(servekit::scheduler_core<servekit::default_scheduler_core>);

} // namespace
