// expect: a scheduler policy needs `using core_type = ...;`
// names: coreless_scheduler minimal_backend
#include "archetypes/minimal_backend.hpp"

#include <servekit/runtime/model.hpp>

/// Plays the scheduler role but names no decision core.
struct coreless_scheduler {
  using policy_role = servekit::scheduler_role;
  static constexpr bool batches_requests = false;
};

[[maybe_unused]] constexpr auto size =
    sizeof(servekit::model<archetypes::minimal_backend, coreless_scheduler>);
