// sequence_batcher<>, the spelling a config error recommends ("compose it with
// servekit::sequence_batcher<>"), compiles and means Triton's default: the direct strategy with
// implicit state in host memory, as named_backend composes it.
#include "archetypes/minimal_backend.hpp"

#include <servekit/runtime/model.hpp>
#include <servekit/schedule/sequence_batcher.hpp>
#include <servekit/state/host_state_store.hpp>

#include <type_traits>

namespace {

static_assert(
    std::is_same_v<servekit::sequence_batcher<>,
                   servekit::sequence_batcher<servekit::direct, servekit::host_state_store>>);

using stateful = servekit::model<archetypes::minimal_backend, servekit::sequence_batcher<>>;
static_assert(std::is_same_v<stateful::scheduler_policy, servekit::sequence_batcher<>>);
static_assert(std::is_same_v<stateful::core_type, servekit::direct_sequence_core>);
static_assert(sizeof(stateful) > 0);

} // namespace
