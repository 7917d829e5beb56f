#pragma once
/// \file
/// Backend `identity`: copies each configured input to the output at the same position in the
/// config (INPUT0 -> OUTPUT0, INPUT1 -> OUTPUT1, ...) unchanged: any data type, BYTES included,
/// and any dims the config declares (-1, ragged batches). It declares nothing itself, so the
/// config's `input` and `output` lists are the whole contract.

#include "execute_delay.hpp"

#include <servekit/backend/backend.hpp>
#include <servekit/core/data_type.hpp>

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace servekit_server {

class identity_backend {
public:
  explicit identity_backend(const servekit::instance_context& context)
      : delay_{execute_delay(context)} {
    if (context.inputs.empty() || context.inputs.size() != context.outputs.size()) {
      throw std::invalid_argument(
          "the identity backend copies input k to output k, so the config must declare as many "
          "outputs as inputs (at least one), got " +
          std::to_string(context.inputs.size()) + " inputs and " +
          std::to_string(context.outputs.size()) + " outputs");
    }
    for (std::size_t k = 0; k < context.inputs.size(); ++k) {
      const auto& in = context.inputs[k];
      const auto& out = context.outputs[k];
      if (in.type != out.type) {
        throw std::invalid_argument(
            "output '" + out.name + "' is " + std::string{servekit::to_config_string(out.type)} +
            " but the identity backend copies it from input '" + in.name + "', which is " +
            std::string{servekit::to_config_string(in.type)});
      }
      pairs_.emplace_back(in.name, out.name);
    }
  }

  void execute(servekit::batch& b) {
    simulate_work(delay_);
    for (std::size_t i = 0; i < b.size(); ++i) {
      servekit::request& r = b.request(i);
      servekit::response& out = b.response(i);
      for (const auto& [input, output] : pairs_) {
        servekit::tensor* t = r.find_input(input);
        // An input the config marks optional may be absent: then so is its output.
        if (t == nullptr || !r.wants_output(output)) {
          continue;
        }
        // The request is the backend's until execute returns: hand its bytes over, no copy.
        servekit::tensor moved = std::move(*t);
        moved.name = output;
        out.outputs.push_back(std::move(moved));
      }
    }
  }

private:
  std::chrono::milliseconds delay_;
  std::vector<std::pair<std::string, std::string>> pairs_; ///< (input, output) names
};

} // namespace servekit_server
