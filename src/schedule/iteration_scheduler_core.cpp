/// \file
/// Compiles servekit/schedule/impl/iteration_scheduler_core.ipp once, into servekit::servekit.

#include <servekit/schedule/iteration_scheduler_core.hpp>

#include <servekit/schedule/impl/iteration_scheduler_core.ipp>
