// model_warmup: every instance runs every sample (count times, 0 meaning once) right after it
// is built and before the model serves; zero, random and file data; a failing sample fails the
// load with an error naming it and the instance.
#include <servekit/runtime/detail/instances.hpp>
#include <servekit/runtime/model.hpp>
#include <servekit/state/host_state_store.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace warmup_test {

using servekit::data_type;
using servekit::warmup_data_kind;

/// What one execution saw.
struct seen_execution {
  std::size_t instance = 0;
  std::string id;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
  bool has_sequences = false;
  bool sequence_start_and_end = false;
};

std::mutex seen_mutex;            // NOLINT: test-only global
std::vector<seen_execution> seen; // NOLINT: test-only global
int alive = 0;                    // NOLINT: test-only global
bool serving = false;             // NOLINT: test-only global: set after construction

struct recording_backend {
  static constexpr std::int32_t max_batch_size = 8;
  static constexpr servekit::tensor_declaration inputs[] = {{"X", data_type::fp32, {-1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"Y", data_type::fp32, {-1}}};

  explicit recording_backend(const servekit::instance_context& context)
      : index_{context.instance_index} {
    const std::lock_guard lock{seen_mutex};
    ++alive;
  }
  recording_backend(const recording_backend&) = delete;
  recording_backend& operator=(const recording_backend&) = delete;
  ~recording_backend() {
    const std::lock_guard lock{seen_mutex};
    --alive;
  }

  void execute(servekit::batch& b) {
    const auto& x = *b.request(0).find_input("X");
    seen_execution e;
    e.instance = index_;
    e.id = b.request(0).id;
    e.shape.assign(x.shape.dims().begin(), x.shape.dims().end());
    const auto values = x.values<float>();
    e.values.assign(values.begin(), values.end());
    e.has_sequences = b.has_sequences();
    e.sequence_start_and_end =
        e.has_sequences && b.sequence(0).start && b.sequence(0).end && b.sequence(0).ready;
    {
      const std::lock_guard lock{seen_mutex};
      EXPECT_FALSE(serving) << "a warmup execution after the model was built";
      seen.push_back(e);
    }
    if (!e.values.empty() && e.values[0] == 13.0F) {
      throw std::runtime_error("unlucky input");
    }
    if (!e.values.empty() && e.values[0] == 7.0F) {
      b.response(0) = servekit::response::failure(servekit::invalid_argument("seven refused"));
      return;
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("X");
      auto& out = b.response(i).add_output("Y", data_type::fp32, in.shape);
      std::copy(in.values<float>().begin(), in.values<float>().end(), out.values<float>().begin());
    }
  }

private:
  std::size_t index_;
};

servekit::model_warmup_options sample(std::string name, std::uint32_t batch_size,
                                      std::uint32_t count, warmup_data_kind kind,
                                      std::vector<std::int64_t> dims, std::string file = {}) {
  servekit::model_warmup_options s;
  s.name = std::move(name);
  s.batch_size = batch_size;
  s.count = count;
  s.inputs["X"] = {data_type::fp32, std::move(dims), kind, std::move(file)};
  return s;
}

/// A temporary model folder with warmup/<file> holding `values`.
std::filesystem::path model_folder_with(const std::string& file, const std::vector<float>& values) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("servekit_warmup_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(dir / "warmup");
  std::ofstream out{dir / "warmup" / file, std::ios::binary};
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
  return dir;
}

class warmup_test : public ::testing::Test {
protected:
  void SetUp() override {
    const std::lock_guard lock{seen_mutex};
    seen.clear();
    serving = false;
  }
  std::vector<seen_execution> take() {
    const std::lock_guard lock{seen_mutex};
    serving = true;
    return std::exchange(seen, {});
  }
};

TEST_F(warmup_test, every_instance_runs_every_sample_before_the_model_is_built) {
  const auto dir = model_folder_with("x.bin", {1.5F, -2.0F, 3.0F});
  servekit::model_options o;
  o.name = "warm";
  o.directory = dir.string();
  o.model_warmup = {sample("zeros", 4, 3, warmup_data_kind::zero_data, {2}),
                    sample("random", 1, 0, warmup_data_kind::random_data, {16}),
                    sample("skipped", 0, 5, warmup_data_kind::zero_data, {1}),
                    sample("file", 2, 1, warmup_data_kind::input_data_file, {3}, "x.bin")};
  servekit::model<recording_backend, servekit::instance_group<2>> m{o};
  const auto runs = take();
  ASSERT_EQ(runs.size(), 2U * (3 + 1 + 1)); // per instance: zeros x3, random once, file once
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& run = runs[i];
    EXPECT_EQ(run.instance, i / 5) << "instance 0 warms up fully before instance 1 is built";
    EXPECT_FALSE(run.has_sequences);
    if (run.id == "warmup:zeros") {
      EXPECT_EQ(run.shape, (std::vector<std::int64_t>{4, 2}));
      EXPECT_EQ(run.values, std::vector<float>(8, 0.0F));
    } else if (run.id == "warmup:random") {
      EXPECT_EQ(run.shape, (std::vector<std::int64_t>{1, 16}));
      bool any_nonzero = false;
      for (const float v : run.values) {
        EXPECT_TRUE(std::isfinite(v));
        any_nonzero = any_nonzero || v != 0.0F;
      }
      EXPECT_TRUE(any_nonzero);
    } else {
      EXPECT_EQ(run.id, "warmup:file");
      EXPECT_EQ(run.shape, (std::vector<std::int64_t>{2, 3}));
      EXPECT_EQ(run.values, (std::vector<float>{1.5F, -2.0F, 3.0F, 1.5F, -2.0F, 3.0F}));
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_F(warmup_test, a_throwing_sample_fails_the_load_naming_sample_and_instance) {
  const auto dir = model_folder_with("bad.bin", {13.0F});
  servekit::model_options o;
  o.name = "cold";
  o.directory = dir.string();
  o.model_warmup = {sample("fine", 1, 0, warmup_data_kind::zero_data, {1}),
                    sample("unlucky", 1, 0, warmup_data_kind::input_data_file, {1}, "bad.bin")};
  try {
    servekit::model<recording_backend, servekit::instance_group<2>> m{o};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.code(), servekit::config_error_code::backend_error);
    EXPECT_EQ(e.path(), "/model_warmup/1");
    const std::string what = e.what();
    EXPECT_NE(what.find("warmup sample 'unlucky'"), std::string::npos) << what;
    EXPECT_NE(what.find("of model 'cold'"), std::string::npos) << what;
    EXPECT_NE(what.find("unlucky input"), std::string::npos) << what;
  }
  EXPECT_EQ(take().size(), 2U); // instance 0 only: instance 1 was never built
  EXPECT_EQ(alive, 0);
  std::filesystem::remove_all(dir);
}

TEST_F(warmup_test, an_error_response_fails_the_load) {
  const auto dir = model_folder_with("seven.bin", {7.0F});
  servekit::model_options o;
  o.directory = dir.string();
  o.model_warmup = {sample("seven", 1, 0, warmup_data_kind::input_data_file, {1}, "seven.bin")};
  try {
    servekit::model<recording_backend> m{o};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/model_warmup/0");
    EXPECT_NE(std::string{e.what()}.find("seven refused"), std::string::npos) << e.what();
  }
  EXPECT_EQ(alive, 0);
  std::filesystem::remove_all(dir);
}

TEST_F(warmup_test, missing_or_wrong_sized_files_and_unknown_inputs_are_config_errors) {
  const auto dir = model_folder_with("short.bin", {1.0F});
  servekit::model_options o;
  o.directory = dir.string();
  o.model_warmup = {sample("absent", 1, 0, warmup_data_kind::input_data_file, {1}, "none.bin")};
  try {
    servekit::model<recording_backend> m{o};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/model_warmup/0/inputs/X/input_data_file");
    EXPECT_NE(std::string{e.what()}.find("cannot read"), std::string::npos) << e.what();
  }
  o.model_warmup = {sample("short", 1, 0, warmup_data_kind::input_data_file, {2}, "short.bin")};
  try {
    servekit::model<recording_backend> m{o};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/model_warmup/0/inputs/X/input_data_file");
    EXPECT_NE(std::string{e.what()}.find("holds 4 bytes, expected 8"), std::string::npos)
        << e.what();
  }
  o.model_warmup = {sample("typo", 1, 0, warmup_data_kind::zero_data, {1})};
  o.model_warmup[0].inputs["Z"] = o.model_warmup[0].inputs["X"];
  try {
    servekit::model<recording_backend> m{o};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/model_warmup/0/inputs/Z");
    EXPECT_NE(std::string{e.what()}.find("does not have"), std::string::npos) << e.what();
  }
  EXPECT_EQ(alive, 0);
  std::filesystem::remove_all(dir);
}

TEST_F(warmup_test, batch_size_beyond_the_model_is_refused) {
  servekit::model_options o;
  o.model_warmup = {sample("big", 9, 0, warmup_data_kind::zero_data, {1})};
  try {
    servekit::model<recording_backend> m{o};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.path(), "/model_warmup/0/batch_size");
    EXPECT_NE(std::string{e.what()}.find("more than max_batch_size 8"), std::string::npos)
        << e.what();
  }
}

TEST_F(warmup_test, sequence_models_warm_up_with_start_and_end_set) {
  servekit::model_options o;
  o.sequence_batching.emplace();
  servekit::control_input start;
  start.name = "START";
  start.control = {{servekit::control_kind::sequence_start, {0, 1}, {}, {}, data_type::invalid}};
  o.sequence_batching->control_input = {start};
  auto s = sample("one step", 1, 0, warmup_data_kind::zero_data, {2});
  s.inputs["START"] = {data_type::int32, {1}, warmup_data_kind::zero_data, ""};
  o.model_warmup = {s};
  servekit::model<recording_backend,
                  servekit::sequence_batcher<servekit::direct, servekit::host_state_store>>
      m{o};
  const auto runs = take();
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_TRUE(runs[0].has_sequences);
  EXPECT_TRUE(runs[0].sequence_start_and_end);
}

TEST_F(warmup_test, warmup_executions_are_recorded_in_statistics) {
  servekit::model_options o;
  o.name = "stats";
  o.model_warmup = {sample("zeros", 2, 3, warmup_data_kind::zero_data, {1})};
  servekit::resolved_config config;
  config.max_batch_size = 8;
  config.inputs = {{"X", data_type::fp32, {-1}, false, false, false}};
  const std::vector<servekit::instance_placement> placements{
      {"stats_0_0", servekit::instance_kind::cpu, 0, 0},
      {"stats_0_1", servekit::instance_kind::cpu, 0, 0}};
  servekit::model_statistics stats{8, {"stats_0_0", "stats_0_1"}};
  auto instances =
      servekit::detail::create_instances<recording_backend>(o, config, placements, &stats);
  EXPECT_EQ(instances.size(), 2U);
  EXPECT_EQ(stats.snapshot().warmup.count, 6U);
  EXPECT_EQ(take().size(), 6U);
  EXPECT_EQ(stats.snapshot().success.count, 0U); // warmup is not inference
}

} // namespace warmup_test
