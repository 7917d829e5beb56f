#pragma once
/// \file
/// The metrics layer: live model statistics. Their Triton-shaped JSON and Prometheus text belong
/// to the server tier (servekit/http/statistics_json.hpp, servekit/http/prometheus.hpp).

#include <servekit/metrics/statistics.hpp>
