#pragma once
/// \file
/// Triton's `ensemble_scheduling` settings (ModelEnsembling): the steps of an ensemble loaded from
/// a model configuration, each naming a composing model and how its tensors map to the
/// ensemble's.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace servekit {

/// One step of `ensemble_scheduling.step[]`.
struct ensemble_step_options {
  std::string model_name;
  std::int64_t model_version = -1; ///< -1: the latest version of `model_name`
  /// Composing model input name -> ensemble tensor name; every model input is mapped once.
  std::map<std::string, std::string> input_map;
  /// Composing model output name -> ensemble tensor name; outputs left out are dropped.
  std::map<std::string, std::string> output_map;
  friend bool operator==(const ensemble_step_options&, const ensemble_step_options&) = default;
};

/// `ensemble_scheduling`: the steps and the per-step in-flight limit.
struct ensemble_scheduling_options {
  std::vector<ensemble_step_options> step;
  /// Most in-flight requests of each step across all requests of the ensemble (backpressure);
  /// 0: unlimited.
  std::uint32_t max_inflight_requests = 0;
  friend bool operator==(const ensemble_scheduling_options&,
                         const ensemble_scheduling_options&) = default;
};

} // namespace servekit
