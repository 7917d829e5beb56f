// expect: a state store needs a public constructor `explicit S.const servekit::state_store_config
// names: not_a_store
#include "archetypes/minimal_backend.hpp"

#include <servekit/runtime/model.hpp>

/// Not a state store: it has none of bind/update/release.
struct not_a_store {};

[[maybe_unused]] constexpr auto size =
    sizeof(servekit::model<archetypes::minimal_backend,
                           servekit::sequence_batcher<servekit::direct, not_a_store>>);
