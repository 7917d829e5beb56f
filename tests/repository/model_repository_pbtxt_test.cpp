// model_repository over Triton-layout folders: config.pbtxt read as config.json is, config.pbtxt
// winning over a config.json beside it (as Triton reads config.pbtxt only), and errors that name
// the file, line and column.
#include "repository_backends.hpp"

#include <servekit/repository.hpp>

#include <gtest/gtest.h>

#include <iostream>
#include <sstream>
#include <string>

namespace model_repository_pbtxt_test {

using namespace repository_tests;
using servekit::model_ready_state;
using servekit::named_backend;

using backends = servekit::backend_list<named_backend<"add", add_backend>>;

constexpr const char* add_pbtxt = R"(# a Triton-layout model: config.pbtxt and version folders
backend: "add"
max_batch_size: 8
dynamic_batching { max_queue_delay_microseconds: 100 }
instance_group [ { count: 1 kind: KIND_CPU } ]
)";

/// Captures what the repository writes to std::clog while it lives.
class clog_capture {
public:
  clog_capture() : previous_{std::clog.rdbuf(text_.rdbuf())} {}
  clog_capture(const clog_capture&) = delete;
  clog_capture& operator=(const clog_capture&) = delete;
  ~clog_capture() { std::clog.rdbuf(previous_); }
  [[nodiscard]] std::string text() const { return text_.str(); }

private:
  std::ostringstream text_;
  std::streambuf* previous_;
};

class RepositoryPbtxt : public ::testing::Test {
protected:
  void SetUp() override { probe().reset(); }
  temp_repository dir;
};

TEST_F(RepositoryPbtxt, ServesAModelFolderWithConfigPbtxt) {
  dir.write_file("adder", "config.pbtxt", add_pbtxt);
  dir.add_folder("adder", "1");
  dir.add_folder("adder", "2");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  ASSERT_EQ(index.size(), 1U);
  EXPECT_EQ(index[0], (servekit::model_index_entry{"adder", 2, model_ready_state::ready, ""}));
  const auto m = repo.find("adder");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->config_file(), dir.root() / "adder" / "config.pbtxt");
  EXPECT_EQ(m->options().name, "adder");
  EXPECT_EQ(m->options().max_batch_size, 8);
  ASSERT_TRUE(m->options().dynamic_batching);
  EXPECT_EQ(m->options().dynamic_batching->max_queue_delay_microseconds, 100U);
  auto f = infer(m->model(), add_request(2.0F));
  const auto r = get(f);
  ASSERT_TRUE(r.ok()) << r.status.message();
  EXPECT_EQ(r.find_output("OUT")->values<float>()[0], 3.0F);
}

TEST_F(RepositoryPbtxt, ConfigPbtxtWinsOverConfigJsonAndTheLoadSaysSo) {
  dir.write_file("adder", "config.pbtxt", add_pbtxt);
  dir.write("adder", "this config.json is not even JSON, and is never read");
  dir.write("json_only", R"({"backend": "add", "max_batch_size": 4})");
  clog_capture clog;
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  ASSERT_EQ(index.size(), 2U);
  EXPECT_EQ(index[0].state, model_ready_state::ready) << index[0].reason;
  EXPECT_EQ(index[1].state, model_ready_state::ready) << index[1].reason;
  EXPECT_EQ(repo.find("adder")->config_file().filename(), "config.pbtxt");
  EXPECT_EQ(repo.find("adder")->options().max_batch_size, 8);
  EXPECT_EQ(repo.find("json_only")->config_file().filename(), "config.json");
  EXPECT_EQ(clog.text(), "servekit: model 'adder': reading adder/config.pbtxt; adder/config.json "
                         "is ignored (config.pbtxt wins, as in Triton)\n");
}

TEST_F(RepositoryPbtxt, ErrorsNameTheFileLineAndColumn) {
  dir.write_file("syntax", "config.pbtxt", "backend: \"add\"\nmax_batch_size 8 }\n");
  dir.write_file("negative", "config.pbtxt", "backend: \"add\"\n  max_batch_size: -1\n");
  dir.write_file("renamed", "config.pbtxt", "name: \"other\"\nbackend: \"add\"\n");
  dir.write_file("missing_version", "config.pbtxt",
                 "backend: \"add\"\nversion_policy {\n  specific { versions: [ 1, 7 ] }\n}\n");
  dir.add_folder("missing_version", "1");
  servekit::model_repository repo{dir.root(), backends{}};
  const auto index = repo.load_all();
  ASSERT_EQ(index.size(), 5U); // missing_version: 1 READY, 7 UNAVAILABLE
  const auto reason_of = [&](const std::string& name, std::int64_t version = 0) {
    for (const auto& entry : index) {
      if (entry.name == name && (version == 0 || entry.version == version)) {
        return entry.reason;
      }
    }
    return std::string{"(no entry)"};
  };
  EXPECT_EQ(reason_of("syntax").rfind("syntax/config.pbtxt:2:16: model config is not valid "
                                      "protobuf text format",
                                      0),
            0U)
      << reason_of("syntax");
  EXPECT_EQ(reason_of("negative"), "negative/config.pbtxt:2:3: /max_batch_size: 'max_batch_size' "
                                   "must be non-negative value");
  EXPECT_EQ(reason_of("renamed"), "renamed/config.pbtxt:1:1: /name: the config names the model "
                                  "'other' but its folder is 'renamed'");
  EXPECT_EQ(reason_of("missing_version", 7),
            "missing_version/config.pbtxt:3:14: /version_policy/specific/versions/1: version 7 of "
            "model 'missing_version' has no version folder 'missing_version/7'");
}

} // namespace model_repository_pbtxt_test
