// expect: a backend needs a public member function `void execute.servekit::batch&.`
// names: no_execute
#include <servekit/runtime/model.hpp>

struct no_execute {
  explicit no_execute(const servekit::instance_context&) {}
};

[[maybe_unused]] constexpr auto size = sizeof(servekit::model<no_execute>);
