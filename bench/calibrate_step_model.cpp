// calibrate_step_model: fits the iteration benches' step-time model,
// t = a + b·(scheduled tokens) + c·(sequences) + d·(context tokens), on the bundled LibTorch
// transformer (examples/models/tiny_lm, servekit::libtorch::causal_lm on one intra-op thread):
// the plans an iteration_scheduler_core makes under a varying load are executed and timed, and
// the coefficients come from least squares (harness/step_model.hpp). Prints the fit and its
// quality; --json prints {"a_us","b_us","c_us","d_us","r2",...} on the last line, which
// `bench_iteration --step-model a,b,c,d` takes. bench_iteration calibrates the same way by
// itself when it is built with LibTorch and given no --step-model.

#include "harness/command_line.hpp"
#include "harness/libtorch_steps.hpp"
#include "harness/machine.hpp"
#include "harness/report.hpp"
#include "harness/step_model.hpp"

#include <cstdio>
#include <filesystem>
#include <string>

int main(int argc, char** argv) {
  bool json = false;
  bool quick = false;
  double steps = 2000;
  std::string model = std::string{SERVEKIT_SOURCE_DIR} + "/examples/models/tiny_lm/1";
  servekit_bench::command_line cl{"calibrate_step_model"};
  cl.json(json)
      .quick(quick, "300 steps (the smoke test)")
      .number("--steps", steps, 50, 100000, "timed steps (2000)")
      .text("--model", model, {}, "the version folder holding tiny_lm's model.pt")
      .when_quick("--steps", steps, 300.0);
  cl.parse(argc, argv);

  const servekit_bench::machine host;
  std::printf("calibrate_step_model  cpu: %s  nproc: %u  load: %.2f%s\n", host.cpu.c_str(),
              host.nproc, host.load, quick ? "  (quick)" : "");
  const auto samples = servekit_bench::time_tiny_lm_steps(model, static_cast<int>(steps));
  const auto fit = servekit_bench::fit_step_model(samples);
  std::printf("tiny_lm on LibTorch (1 thread), %zu steps: t = %.1f us + %.2f us/token + %.1f "
              "us/seq + %.4f us/context token\n",
              fit.samples, fit.model.a_us, fit.model.b_us, fit.model.c_us, fit.model.d_us);
  std::printf("fit: R^2 = %.3f, median |error| = %.1f %%\n", fit.r2, fit.median_abs_error_pct);
  if (json) {
    servekit_bench::report figures;
    figures.put("a_us", fit.model.a_us);
    figures.put("b_us", fit.model.b_us);
    figures.put("c_us", fit.model.c_us);
    figures.put("d_us", fit.model.d_us);
    figures.put("r2", fit.r2);
    figures.put("median_abs_error_pct", fit.median_abs_error_pct);
    figures.put("steps", static_cast<double>(fit.samples));
    figures.put_run(quick, host, 0);
    figures.print_json();
  }
  return fit.samples > 0 ? 0 : 1;
}
