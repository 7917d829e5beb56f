// expect: got more than one scheduler policy
// names: dynamic_batcher default_scheduler minimal_backend
#include "archetypes/minimal_backend.hpp"

#include <servekit/runtime/model.hpp>

[[maybe_unused]] constexpr auto size =
    sizeof(servekit::model<archetypes::minimal_backend, servekit::dynamic_batcher<>,
                           servekit::default_scheduler>);
