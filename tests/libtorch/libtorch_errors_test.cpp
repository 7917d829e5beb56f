// The LibTorch backend's errors: a model file that is missing, corrupt or elsewhere than
// default_model_filename says, forward() disagreeing with the config (arity, argument and result
// types, output indices, data types, naming under implicit state), bad thread counts, and torch
// failing at run time (that batch fails, naming the model; the model goes on).
#include "libtorch_test_support.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace libtorch_errors_test {

using namespace libtorch_tests;
using servekit::shape;

TEST(LibTorchErrors, ATypeLibTorchLacksFailsTheLoad) {
  torch_repository dir;
  dir.add("unsigned", R"(
platform: "pytorch_libtorch"
input [ { name: "INPUT__0" data_type: TYPE_UINT16 dims: [ 2 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2, 2 ] } ]
)",
          "reshape");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto error = load_error(repo.load_all(), "unsigned");
  EXPECT_NE(error.find("model 'unsigned'"), std::string::npos) << error;
  EXPECT_NE(error.find("input 'INPUT__0' is TYPE_UINT16, which LibTorch has no tensors of"),
            std::string::npos)
      << error;
}

// -- the model file ---------------------------------------------------------------------------

TEST(LibTorchErrors, DefaultModelFilenameNamesTheFileInTheVersionFolder) {
  torch_repository dir;
  const std::string pbtxt = pair_pbtxt("INPUT__0", "INPUT__1", "OUTPUT__0", "OUTPUT__1") +
                            "default_model_filename: \"traced.pt\"\n";
  dir.add("named", pbtxt, "pair", "traced.pt");
  dir.add("looks_for_traced", pbtxt, "pair", "model.pt");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  EXPECT_EQ(load_error(index, "named"), "");
  const auto error = load_error(index, "looks_for_traced");
  EXPECT_NE(error.find("model 'looks_for_traced'"), std::string::npos) << error;
  EXPECT_NE(error.find("no model file 'looks_for_traced/1/traced.pt'"), std::string::npos) << error;
}

TEST(LibTorchErrors, AMissingModelFileFailsTheLoadNamingModelAndFile) {
  torch_repository dir;
  dir.add("present", pair_pbtxt("INPUT__0", "INPUT__1", "OUTPUT__0", "OUTPUT__1"), "pair");
  std::filesystem::remove(dir.root() / "present" / "1" / "model.pt");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto error = load_error(repo.load_all(), "present");
  EXPECT_NE(error.find("model 'present'"), std::string::npos) << error;
  // Named within the repository: load errors reach clients, host paths must not.
  EXPECT_NE(error.find("no model file 'present/1/model.pt'"), std::string::npos) << error;
  EXPECT_EQ(error.find(dir.root().string()), std::string::npos) << error;
}

TEST(LibTorchErrors, ACorruptModelFileFailsTheLoadNamingModelAndFile) {
  torch_repository dir;
  dir.add("corrupt", pair_pbtxt("INPUT__0", "INPUT__1", "OUTPUT__0", "OUTPUT__1"), "pair");
  dir.write_model_file("corrupt", "model.pt", "this is not a zip archive, let alone TorchScript");
  // A truncated TorchScript file: the archive's start without its directory.
  dir.add("truncated", pair_pbtxt("INPUT__0", "INPUT__1", "OUTPUT__0", "OUTPUT__1"), "pair");
  std::filesystem::resize_file(dir.root() / "truncated" / "1" / "model.pt", 200);
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  for (const auto* name : {"corrupt", "truncated"}) {
    const auto error = load_error(index, name);
    EXPECT_NE(error.find("model '" + std::string{name} + "'"), std::string::npos) << error;
    EXPECT_NE(error.find("'" + std::string{name} +
                         "/1/model.pt' is not a TorchScript model LibTorch can load"),
              std::string::npos)
        << error;
  }
}

// -- forward() against the config -------------------------------------------------------------

TEST(LibTorchErrors, ForwardsArityMustMatchTheConfigsInputs) {
  torch_repository dir;
  dir.add("one_input", R"(
platform: "pytorch_libtorch"
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
)",
          "pair");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto error = load_error(repo.load_all(), "one_input");
  EXPECT_NE(error.find("model 'one_input'"), std::string::npos) << error;
  EXPECT_NE(error.find("does not fit the config: the config declares 1 input(s) (INPUT__0) but "
                       "forward() takes 2 (a, b)"),
            std::string::npos)
      << error;
}

TEST(LibTorchErrors, ForwardArgumentsAndResultsMustBeTensors) {
  torch_repository dir;
  dir.add("int_argument", pair_pbtxt("INPUT__0", "INPUT__1", "OUTPUT__0", "OUTPUT__1"),
          "int_argument");
  dir.add("returns_list", R"(
platform: "pytorch_libtorch"
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 1 ] } ]
)",
          "returns_list");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  const auto int_argument = load_error(index, "int_argument");
  EXPECT_NE(int_argument.find("takes argument 'n' as int; the LibTorch backend passes every "
                              "input as a Tensor"),
            std::string::npos)
      << int_argument;
  const auto returns_list = load_error(index, "returns_list");
  EXPECT_NE(returns_list.find("returns List[Tensor]; the LibTorch backend reads a Tensor or a "
                              "tuple of Tensors"),
            std::string::npos)
      << returns_list;
}

TEST(LibTorchErrors, OutputsMustNameResultsForwardReturns) {
  torch_repository dir;
  dir.add("third_output", pair_pbtxt("INPUT__0", "INPUT__1", "OUTPUT__0", "OUTPUT__2"), "pair");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto error = load_error(repo.load_all(), "third_output");
  EXPECT_NE(error.find("output 'OUTPUT__2' names index 2 but forward() has 2 results"),
            std::string::npos)
      << error;
}

TEST(LibTorchErrors, ThreadCountsMustBeCounts) {
  torch_repository dir;
  dir.add("threads", pair_pbtxt("INPUT__0", "INPUT__1", "OUTPUT__0", "OUTPUT__1") + R"(
parameters { key: "INTRA_OP_THREAD_COUNT" value: { string_value: "many" } }
)",
          "pair", "model.pt", false);
  servekit::model_repository repo{dir.root(), backends{}};
  const auto error = load_error(repo.load_all(), "threads");
  EXPECT_NE(error.find("model parameter INTRA_OP_THREAD_COUNT must be a thread count "
                       "(a non-negative integer), got 'many'"),
            std::string::npos)
      << error;
}

TEST(LibTorchErrors, ImplicitStateNeedsIndexedNames) {
  torch_repository dir;
  std::string pbtxt{gru_pbtxt};
  pbtxt.replace(pbtxt.find("OUTPUT_STATE__1"), std::string_view{"OUTPUT_STATE__1"}.size(),
                "OUTPUT_STATE");
  dir.add("gru", pbtxt, "gru");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto error = load_error(repo.load_all(), "gru");
  EXPECT_NE(error.find("keeps implicit state, so every input, output and state must be named "
                       "<name>__<index> (Triton's rule); the inputs follow named_index, the "
                       "outputs config_order"),
            std::string::npos)
      << error;
}

// -- run-time errors --------------------------------------------------------------------------

constexpr std::string_view reshape_pbtxt = R"(
backend: "pytorch"
input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]
)";

servekit::request floats(std::int64_t n) {
  servekit::request r;
  r.inputs.push_back(servekit::make_tensor("INPUT__0", servekit::data_type::fp32, shape{n}));
  for (auto& v : r.inputs.back().values<float>()) {
    v = 1.0F;
  }
  return r;
}

TEST(LibTorchErrors, ATorchErrorFailsTheBatchNamingTheModelAndTheModelGoesOn) {
  torch_repository dir;
  dir.add("reshape",
          std::string{reshape_pbtxt} +
              R"(output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ 2, 2 ] } ])",
          "reshape");
  servekit::model_repository repo{dir.root(), backends{}};
  ASSERT_EQ(load_error(repo.load_all(), "reshape"), "");
  const auto m = repo.find("reshape");
  const auto failed = infer_now(m->model(), floats(3)); // 3 elements do not make 2x2
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status.code(), servekit::status_code::internal);
  EXPECT_NE(failed.status.message().find("backend of model 'reshape' failed in instance "
                                         "'reshape_0_0': LibTorch failed in forward(): "),
            std::string::npos)
      << failed.status.message();
  EXPECT_NE(failed.status.message().find("shape '[2, 2]' is invalid for input of size 3"),
            std::string::npos)
      << failed.status.message();
  const auto next = infer_now(m->model(), floats(4));
  ASSERT_TRUE(next.ok()) << next.status.message();
  EXPECT_EQ(next.output("OUTPUT__0").shape, (shape{2, 2}));
}

TEST(LibTorchErrors, AResultOfAnotherTypeThanTheConfigsFailsTheBatch) {
  torch_repository dir;
  dir.add("reshape",
          std::string{reshape_pbtxt} +
              R"(output [ { name: "OUTPUT__0" data_type: TYPE_INT32 dims: [ 2, 2 ] } ])",
          "reshape");
  servekit::model_repository repo{dir.root(), backends{}};
  ASSERT_EQ(load_error(repo.load_all(), "reshape"), "");
  const auto r = infer_now(repo.find("reshape")->model(), floats(4));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(
      r.status.message(),
      "backend of model 'reshape' failed in instance 'reshape_0_0': forward() returned output "
      "'OUTPUT__0' as Float but the config declares TYPE_INT32");
}

} // namespace libtorch_errors_test
