// Backend, model and instance lifecycles: optional backend_state (one per backend type, shared
// by its models) and model_state (one per model, shared by its instances) are built and
// destroyed in Triton's order, and a constructor that throws fails the load cleanly.
#include <servekit/runtime/model.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace lifecycle_test {

using servekit::data_type;

/// Every construction ("+") and destruction ("-") in order.
std::mutex log_mutex;              // NOLINT: test-only global
std::vector<std::string> life_log; // NOLINT: test-only global
bool backend_state_throws = false; // NOLINT: test-only global

void record(std::string event) {
  const std::lock_guard lock{log_mutex};
  life_log.push_back(std::move(event));
}

std::vector<std::string> take_log() {
  const std::lock_guard lock{log_mutex};
  return std::exchange(life_log, {});
}

struct stateful_backend {
  static constexpr std::int32_t max_batch_size = 4;
  static constexpr servekit::tensor_declaration inputs[] = {{"IN", data_type::int32, {1}}};
  static constexpr servekit::tensor_declaration outputs[] = {{"OUT", data_type::int32, {1}}};

  struct backend_state {
    backend_state() {
      if (backend_state_throws) {
        throw std::runtime_error("no licence for the backend");
      }
      record("backend+");
    }
    backend_state(const backend_state&) = delete;
    backend_state& operator=(const backend_state&) = delete;
    ~backend_state() { record("backend-"); }
    int models = 0;
  };

  struct model_state {
    model_state(const servekit::model_context& context, backend_state& backend)
        : name{context.model_name}, backend_state_seen{&backend} {
      if (context.parameter("model_throws")) {
        throw std::runtime_error("weights missing");
      }
      ++backend.models;
      record("model+ " + name);
    }
    model_state(const model_state&) = delete;
    model_state& operator=(const model_state&) = delete;
    ~model_state() { record("model- " + name); }
    std::string name;
    backend_state* backend_state_seen;
  };

  stateful_backend(const servekit::instance_context& context, model_state& model)
      : model_{model}, index_{context.instance_index} {
    const auto fail_at = context.parameter("instance_throws_at");
    if (fail_at && std::stoul(std::string{*fail_at}) == index_) {
      throw std::runtime_error("instance " + std::to_string(index_) + " has no memory");
    }
    record("instance+ " + model_.name + " " + std::to_string(index_));
  }
  stateful_backend(const stateful_backend&) = delete;
  stateful_backend& operator=(const stateful_backend&) = delete;
  ~stateful_backend() { record("instance- " + model_.name + " " + std::to_string(index_)); }

  void execute(servekit::batch& b) {
    for (std::size_t i = 0; i < b.size(); ++i) {
      const auto& in = *b.request(i).find_input("IN");
      auto& out = b.response(i).add_output("OUT", data_type::int32, in.shape);
      out.values<std::int32_t>()[0] =
          in.values<std::int32_t>()[0] + model_.backend_state_seen->models;
    }
  }

private:
  model_state& model_;
  std::size_t index_;
};

static_assert(servekit::backend<stateful_backend>);

using three_instances = servekit::model<stateful_backend, servekit::instance_group<3>>;

servekit::model_options named(std::string name) {
  servekit::model_options o;
  o.name = std::move(name);
  return o;
}

class lifecycle_test : public ::testing::Test {
protected:
  void SetUp() override {
    backend_state_throws = false;
    (void)take_log();
  }
  void TearDown() override { backend_state_throws = false; }
};

TEST_F(lifecycle_test, builds_backend_then_model_then_instances_and_destroys_in_reverse) {
  {
    three_instances m{named("a")};
    EXPECT_EQ(take_log(), (std::vector<std::string>{"backend+", "model+ a", "instance+ a 0",
                                                    "instance+ a 1", "instance+ a 2"}));
    servekit::request r;
    r.inputs.push_back(servekit::make_tensor<std::int32_t>("IN", data_type::int32, {1, 1},
                                                           std::vector<std::int32_t>{41}));
    const auto response = m.infer(std::move(r)).get();
    ASSERT_TRUE(response.ok()) << response.status.message();
    EXPECT_EQ(response.find_output("OUT")->values<std::int32_t>()[0], 42); // sees backend state
  }
  const auto log = take_log();
  ASSERT_EQ(log.size(), 5U);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(log[i].rfind("instance- a ", 0), 0U) << log[i];
  }
  EXPECT_EQ(log[3], "model- a");
  EXPECT_EQ(log[4], "backend-");
}

TEST_F(lifecycle_test, backend_state_lives_from_the_first_model_to_the_last) {
  auto a = std::make_unique<servekit::model<stateful_backend>>(named("a"));
  auto b = std::make_unique<servekit::model<stateful_backend>>(named("b"));
  EXPECT_EQ(take_log(), (std::vector<std::string>{"backend+", "model+ a", "instance+ a 0",
                                                  "model+ b", "instance+ b 0"}));
  a.reset();
  EXPECT_EQ(take_log(), (std::vector<std::string>{"instance- a 0", "model- a"}));
  b.reset();
  EXPECT_EQ(take_log(), (std::vector<std::string>{"instance- b 0", "model- b", "backend-"}));
  servekit::model<stateful_backend> c{named("c")};
  EXPECT_EQ(take_log(), (std::vector<std::string>{"backend+", "model+ c", "instance+ c 0"}));
}

TEST_F(lifecycle_test, instance_that_throws_destroys_the_built_ones_in_reverse_order) {
  auto o = named("m");
  o.parameters["instance_throws_at"] = "2";
  try {
    three_instances m{o};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.code(), servekit::config_error_code::backend_error);
    EXPECT_NE(std::string{e.what()}.find("instance 2 has no memory"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(take_log(),
            (std::vector<std::string>{"backend+", "model+ m", "instance+ m 0", "instance+ m 1",
                                      "instance- m 1", "instance- m 0", "model- m", "backend-"}));
}

TEST_F(lifecycle_test, model_state_that_throws_fails_the_load_with_its_message) {
  auto o = named("m");
  o.parameters["model_throws"] = "1";
  try {
    three_instances m{o};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_EQ(e.code(), servekit::config_error_code::backend_error);
    EXPECT_NE(std::string{e.what()}.find("model 'm' failed to initialize: weights missing"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(take_log(), (std::vector<std::string>{"backend+", "backend-"}));
}

TEST_F(lifecycle_test, backend_state_that_throws_fails_the_load_with_its_message) {
  backend_state_throws = true;
  try {
    three_instances m{named("m")};
    FAIL() << "expected config_error";
  } catch (const servekit::config_error& e) {
    EXPECT_NE(std::string{e.what()}.find("no licence for the backend"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(take_log().empty());
  backend_state_throws = false;
  three_instances m{named("again")}; // a later load builds it afresh
  EXPECT_EQ(take_log().front(), "backend+");
}

/// A backend with only a model state: its instances get it by reference.
struct model_state_only_backend {
  struct model_state {
    explicit model_state(const servekit::model_context& context)
        : name{context.model_name}, batch{context.max_batch_size} {}
    std::string name;
    std::int32_t batch;
  };
  model_state_only_backend(const servekit::instance_context&, model_state& model) {
    const std::lock_guard lock{log_mutex};
    seen.push_back(&model);
  }
  void execute(servekit::batch&) {}
  static inline std::vector<const model_state*> seen; // NOLINT: test-only
};

TEST_F(lifecycle_test, instances_of_a_model_share_one_model_state) {
  model_state_only_backend::seen.clear();
  { servekit::model<model_state_only_backend, servekit::instance_group<2>> m{named("shared")}; }
  ASSERT_EQ(model_state_only_backend::seen.size(), 2U);
  EXPECT_EQ(model_state_only_backend::seen[0], model_state_only_backend::seen[1]);
}

} // namespace lifecycle_test
