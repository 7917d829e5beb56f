// expect: every policy of model<Backend, Policies...> must name its role
// names: not_a_policy minimal_backend
#include "archetypes/minimal_backend.hpp"

#include <servekit/runtime/model.hpp>

struct not_a_policy {};

[[maybe_unused]] constexpr auto size =
    sizeof(servekit::model<archetypes::minimal_backend, not_a_policy>);
