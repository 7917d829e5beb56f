// expect: an instance_group policy needs `static constexpr std::int32_t default_count = N;`
// names: countless_group minimal_backend
#include "archetypes/minimal_backend.hpp"

#include <servekit/runtime/model.hpp>

/// Plays the instance_group role but says nothing of how many instances to run.
struct countless_group {
  using policy_role = servekit::instance_group_role;
};

[[maybe_unused]] constexpr auto size =
    sizeof(servekit::model<archetypes::minimal_backend, countless_group>);
