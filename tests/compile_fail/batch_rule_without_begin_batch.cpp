// expect: servekit: a batch rule .the Rule of dynamic_batcher<Rule>. needs `void begin_batch..`
// names: keep_short_rule dynamic_batcher<keep_short_rule>
#include "archetypes/minimal_backend.hpp"

#include <servekit/runtime/model.hpp>

/// A custom batch rule that forgot begin_batch(), so it cannot reset per batch.
struct keep_short_rule {
  [[nodiscard]] bool include(const servekit::request&) const { return true; }
};

[[maybe_unused]] constexpr auto size = sizeof(
    servekit::model<archetypes::minimal_backend, servekit::dynamic_batcher<keep_short_rule>>);
