#pragma once
// The step-time model of the iteration benches: t = a + b·(scheduled tokens) + c·(sequences) +
// d·(context tokens), in microseconds (the Vidur-style model of
// ../shared/reference/iteration-scheduling.md), and its least-squares fit from timed steps.
#include <servekit/schedule/iteration_scheduler_core.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace servekit_bench {

/// t = a + b·tokens + c·sequences + d·context tokens, in microseconds.
struct step_model {
  double a_us = 0;
  double b_us = 0;
  double c_us = 0;
  double d_us = 0;

  [[nodiscard]] double predict_us(double tokens, double sequences, double context) const {
    return a_us + b_us * tokens + c_us * sequences + d_us * context;
  }
  [[nodiscard]] double step_us(const servekit::step_plan& plan) const {
    return predict_us(plan.scheduled_tokens, static_cast<double>(plan.sequences.size()),
                      context_tokens(plan));
  }
  /// Σ over the plan's sequences of the tokens their attention reads (first_token + num_tokens).
  [[nodiscard]] static double context_tokens(const servekit::step_plan& plan) {
    double context = 0;
    for (const auto& s : plan.sequences) {
      context += s.first_token + s.num_tokens;
    }
    return context;
  }
};

/// One timed step.
struct step_sample {
  double tokens = 0;
  double sequences = 0;
  double context = 0;
  double us = 0;
};

/// A fitted model and how well it fits its samples.
struct step_fit {
  step_model model;
  double r2 = 0;                   ///< coefficient of determination
  double median_abs_error_pct = 0; ///< median |predicted − measured| / measured, in percent
  std::size_t samples = 0;
};

/// Ordinary least squares over `samples` (normal equations, Gaussian elimination with partial
/// pivoting: 4 unknowns). Coefficients that come out negative are clamped to 0 and the others
/// refitted, so the model stays physical (no step gets cheaper with more work).
[[nodiscard]] inline step_fit fit_step_model(const std::vector<step_sample>& samples) {
  std::array<bool, 4> used{true, true, true, true};
  std::array<double, 4> beta{};
  for (int round = 0; round < 4; ++round) {
    std::array<std::array<double, 5>, 4> m{}; // [X'X | X'y]
    for (const auto& s : samples) {
      const std::array<double, 4> x{1.0, s.tokens, s.sequences, s.context};
      for (std::size_t i = 0; i < 4; ++i) {
        for (std::size_t j = 0; j < 4; ++j) {
          m[i][j] += x[i] * x[j];
        }
        m[i][4] += x[i] * s.us;
      }
    }
    for (std::size_t i = 0; i < 4; ++i) {
      if (!used[i]) { // fixed at 0: the row says beta_i = 0
        m[i] = {};
        m[i][i] = 1;
        for (std::size_t r = 0; r < 4; ++r) {
          if (r != i) {
            m[r][i] = 0;
          }
        }
      }
    }
    for (std::size_t c = 0; c < 4; ++c) {
      std::size_t pivot = c;
      for (std::size_t r = c + 1; r < 4; ++r) {
        if (std::abs(m[r][c]) > std::abs(m[pivot][c])) {
          pivot = r;
        }
      }
      std::swap(m[c], m[pivot]);
      if (std::abs(m[c][c]) < 1e-300) {
        continue;
      }
      for (std::size_t r = 0; r < 4; ++r) {
        if (r != c) {
          const double f = m[r][c] / m[c][c];
          for (std::size_t k = c; k < 5; ++k) {
            m[r][k] -= f * m[c][k];
          }
        }
      }
    }
    bool negative = false;
    for (std::size_t i = 0; i < 4; ++i) {
      beta[i] = std::abs(m[i][i]) < 1e-300 ? 0 : m[i][4] / m[i][i];
      if (used[i] && beta[i] < 0) {
        used[i] = false;
        negative = true;
      }
    }
    if (!negative) {
      break;
    }
  }
  step_fit out;
  out.model = {std::max(beta[0], 0.0), std::max(beta[1], 0.0), std::max(beta[2], 0.0),
               std::max(beta[3], 0.0)};
  out.samples = samples.size();
  double mean = 0;
  for (const auto& s : samples) {
    mean += s.us;
  }
  mean /= samples.empty() ? 1.0 : static_cast<double>(samples.size());
  double ss_res = 0;
  double ss_tot = 0;
  std::vector<double> errors;
  for (const auto& s : samples) {
    const double p = out.model.predict_us(s.tokens, s.sequences, s.context);
    ss_res += (s.us - p) * (s.us - p);
    ss_tot += (s.us - mean) * (s.us - mean);
    errors.push_back(s.us > 0 ? std::abs(p - s.us) / s.us * 100 : 0);
  }
  out.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 0;
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    out.median_abs_error_pct = errors[errors.size() / 2];
  }
  return out;
}

} // namespace servekit_bench
