// expect: servekit: an ensemble needs at least one step
// names: ensemble_has_no_steps
// An ensemble of no steps.
#include <servekit/ensemble/ensemble.hpp>

using pipeline = servekit::ensemble<servekit::inputs<"IMAGE">, servekit::outputs<"IMAGE_OUT">>;

[[maybe_unused]] constexpr auto size = sizeof(pipeline);
