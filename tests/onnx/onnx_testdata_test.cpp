// The ONNX backend against Debian's libonnx-testdata: every graph of the set, each loaded as a
// model (auto-completed, unbatched) and run on its first test set, its outputs compared with the
// reference ones (relative 1e-3, absolute 1e-5, as ONNX's own backend tests compare; integers
// and booleans exactly). Each graph ends in one outcome; the table is written to
// <build>/tests/onnx_conformance.txt and docs/backends.md reports it. The test fails when fewer
// graphs pass than when the table was last taken (a regression), or when a graph that loads
// crashes or hangs the model.

#include <servekit/core/config_error.hpp>
#include <servekit/core/data_type.hpp>
#include <servekit/core/request.hpp>
#include <servekit/core/tensor.hpp>
#include <servekit/onnx.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/runtime/model_options.hpp>

#include <gtest/gtest.h>
#include <opencv2/core/utils/logger.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace onnx_testdata_test {

namespace fs = std::filesystem;
using servekit::data_type;
namespace onnx = servekit::onnx;

const fs::path testdata{"/usr/share/libonnx-testdata/data"};

/// How one graph of the set ended.
enum class outcome {
  passed,        ///< every output within tolerance
  no_model_file, ///< the package lists the graph (a download) without its model.onnx
  not_served,    ///< an input or output servekit has no type for (STRING, sequences, ...)
  not_imported,  ///< OpenCV 4.6's importer refuses the graph
  load_failed,   ///< another load error (the config the graph completes to, say)
  run_failed,    ///< the forward pass failed
  mismatch,      ///< an output differs from the reference (values, shape or type)
  unwritten,     ///< OpenCV leaves an output unwritten: not compared (see run_graph)
};

const char* name_of(outcome o) {
  switch (o) {
  case outcome::passed:
    return "passed";
  case outcome::no_model_file:
    return "no model file";
  case outcome::not_served:
    return "type not served";
  case outcome::not_imported:
    return "OpenCV cannot import";
  case outcome::load_failed:
    return "load failed";
  case outcome::run_failed:
    return "forward failed";
  case outcome::mismatch:
    return "wrong result";
  case outcome::unwritten:
    return "output left unwritten";
  }
  return "?";
}

/// Element `i` of `t` as a double (for comparing any two numeric types).
double element(const servekit::tensor& t, std::size_t i) {
  const std::byte* p = t.data.data() + i * servekit::byte_size(t.type);
  double value = std::nan("");
  // The backend's own dispatch over the element types it reads (BOOL as uint8).
  (void)servekit::onnx::detail::with_element_type(t.type, [&]<class T>(T) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    value = static_cast<double>(v);
  });
  return value;
}

/// Why `got` is not `want` ("" when it is).
std::string difference(const servekit::tensor& got, const servekit::tensor& want) {
  if (got.type != want.type) {
    return std::string{"type "} + std::string{servekit::to_string(got.type)} + ", want " +
           std::string{servekit::to_string(want.type)};
  }
  if (got.element_count() != want.element_count()) {
    return "element count " + std::to_string(got.element_count()) + ", want " +
           std::to_string(want.element_count());
  }
  if (!(got.shape == want.shape)) {
    return "shape differs";
  }
  const bool exact = want.type != data_type::fp32 && want.type != data_type::fp64 &&
                     want.type != data_type::fp16 && want.type != data_type::bf16;
  for (std::size_t i = 0; i < static_cast<std::size_t>(want.element_count()); ++i) {
    const double a = element(got, i);
    const double b = element(want, i);
    if (std::isnan(a) && std::isnan(b)) {
      continue;
    }
    const bool ok = exact ? a == b : std::abs(a - b) <= 1e-5 + 1e-3 * std::abs(b);
    if (!ok) {
      return "element " + std::to_string(i) + " is " + std::to_string(a) + ", want " +
             std::to_string(b);
    }
  }
  return "";
}

struct result {
  outcome kind = outcome::passed;
  std::string detail;
};

/// Loads and runs one graph folder.
result run_graph(const fs::path& folder) {
  if (!fs::exists(folder / "model.onnx")) {
    return {outcome::no_model_file, ""};
  }
  // OpenCV's Dropout computes its output but never writes its optional `mask` output, which
  // then holds whatever the memory held: comparing it would pass or fail by chance.
  const std::string graph = folder.filename().string();
  if (graph.find("dropout") != std::string::npos && graph.find("mask") != std::string::npos) {
    return {outcome::unwritten, "OpenCV's Dropout does not write its mask output"};
  }
  const fs::path set = folder / "test_data_set_0";
  servekit::model_options options;
  options.name = folder.filename().string();
  options.directory = folder.string();
  options.max_batch_size = 0; // the sets' shapes are fixed: no batch dimension
  try {
    servekit::model<onnx::backend> m{options};
    servekit::request r;
    r.id = options.name;
    for (std::size_t k = 0; k < m.inputs().size(); ++k) {
      servekit::tensor t = onnx::read_tensor_file(set / ("input_" + std::to_string(k) + ".pb"));
      t.name = m.inputs()[k].name;
      r.inputs.push_back(std::move(t));
    }
    const servekit::response response = m.infer(std::move(r)).get();
    if (!response.status.ok()) {
      return {outcome::run_failed, response.status.message()};
    }
    for (std::size_t k = 0; k < m.outputs().size(); ++k) {
      const servekit::tensor want =
          onnx::read_tensor_file(set / ("output_" + std::to_string(k) + ".pb"));
      const auto it =
          std::find_if(response.outputs.begin(), response.outputs.end(),
                       [&](const servekit::tensor& t) { return t.name == m.outputs()[k].name; });
      if (it == response.outputs.end()) {
        return {outcome::mismatch, "no output " + m.outputs()[k].name};
      }
      const std::string why = difference(*it, want);
      if (!why.empty()) {
        return {outcome::mismatch, m.outputs()[k].name + ": " + why};
      }
    }
    return {outcome::passed, ""};
  } catch (const servekit::config_error& e) {
    const std::string what = e.what();
    if (what.find("cannot import this graph") != std::string::npos) {
      return {outcome::not_imported, what};
    }
    if (what.find("servekit has no data type") != std::string::npos ||
        what.find("is not a tensor") != std::string::npos) {
      return {outcome::not_served, what};
    }
    return {outcome::load_failed, what};
  } catch (const onnx::graph_error& e) {
    return {outcome::load_failed, e.what()}; // a test-set tensor servekit cannot read
  }
}

/// The most graphs that passed when this table was last taken (docs/backends.md).
constexpr std::size_t passed_when_last_measured = 407;

TEST(OnnxTestdata, EveryGraphOfTheSetEndsInOneOutcome) {
  ASSERT_TRUE(fs::is_directory(testdata)) << testdata
                                          << " is missing: apt-get install "
                                             "libonnx-testdata (scripts/install-deps.sh)";
  std::vector<fs::path> folders;
  for (const auto& group : fs::directory_iterator{testdata}) {
    for (const auto& graph : fs::directory_iterator{group.path()}) {
      folders.push_back(graph.path());
    }
  }
  std::sort(folders.begin(), folders.end());

  // OpenCV's importer logs every node it refuses; the table has the same, one line per graph.
  const auto previous = cv::utils::logging::getLogLevel();
  cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
  std::map<outcome, std::size_t> counts;
  std::ofstream table{"onnx_conformance.txt", std::ios::trunc};
  for (const auto& folder : folders) {
    const result r = run_graph(folder);
    ++counts[r.kind];
    std::string detail = r.detail; // one line per graph: OpenCV's messages span several
    std::replace(detail.begin(), detail.end(), '\n', ' ');
    table << fs::relative(folder, testdata).string() << '\t' << name_of(r.kind) << '\t' << detail
          << '\n';
  }
  std::string summary;
  for (const auto& [kind, n] : counts) {
    summary += std::string{name_of(kind)} + ": " + std::to_string(n) + "; ";
  }
  cv::utils::logging::setLogLevel(previous);
  std::cout << "libonnx-testdata, " << folders.size() << " graphs: " << summary << '\n';
  EXPECT_GE(counts[outcome::passed], passed_when_last_measured) << summary;
}

} // namespace onnx_testdata_test
