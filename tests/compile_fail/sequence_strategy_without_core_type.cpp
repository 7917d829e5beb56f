// expect: servekit: a sequence batcher strategy .the Strategy of sequence_batcher<Strategy, Store>
// names: my_strategy sequence_batcher<my_strategy>
#include "archetypes/minimal_backend.hpp"

#include <servekit/runtime/model.hpp>

/// A strategy tag that names neither its core nor which Triton strategy it is.
struct my_strategy {};

[[maybe_unused]] constexpr auto size =
    sizeof(servekit::model<archetypes::minimal_backend, servekit::sequence_batcher<my_strategy>>);
