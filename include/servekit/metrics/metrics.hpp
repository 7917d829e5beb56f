#pragma once
/// \file
/// The metrics layer: live model statistics, their Triton-shaped JSON, and Prometheus text.

#include <servekit/metrics/prometheus.hpp>
#include <servekit/metrics/statistics.hpp>
#include <servekit/metrics/statistics_json.hpp>
