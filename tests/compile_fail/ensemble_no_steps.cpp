// expect: ensemble_fault::no_steps.*an ensemble needs at least one step
// An ensemble of no steps.
#include <servekit/ensemble/ensemble.hpp>

using pipeline = servekit::ensemble<servekit::inputs<"IMAGE">, servekit::outputs<"IMAGE_OUT">>;

[[maybe_unused]] constexpr auto size = sizeof(pipeline);
