#pragma once
/// \file
/// The metrics layer: live model statistics, their Triton-shaped JSON, and Prometheus text (the
/// same as servekit/metrics/metrics.hpp, named like the other layers' umbrellas).

#include <servekit/metrics/metrics.hpp>
