// repository_poller: Triton's poll mode. The decision (what changed between two scans) is pure
// and tested on hand-made scans; scans and polls run on a real folder with modification times
// set explicitly, so no test waits for a clock to tick.
#include "repository_backends.hpp"

#include <servekit/repository.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace repository_poller_test {

using namespace repository_tests;
using servekit::model_ready_state;
using servekit::named_backend;
using servekit::repository_changes;
using servekit::repository_scan;

using backends = servekit::backend_list<named_backend<"add", add_backend>>;

constexpr const char* add_config = R"({"backend": "add", "max_batch_size": 8})";

using file_time = std::filesystem::file_time_type;
file_time at(int seconds) { return file_time{} + std::chrono::seconds{seconds}; }

TEST(RepositoryPoll, ChangesBetweenScans) {
  repository_scan before;
  before["kept"].config_time = at(1);
  before["edited"].config_time = at(1);
  before["new_version"].config_time = at(1);
  before["new_version"].versions = {{"1", at(1)}};
  before["gone"].config_time = at(1);
  repository_scan after = before;
  after.erase("gone");
  after["edited"].config_time = at(2);
  after["new_version"].versions = {{"1", at(1)}, {"2", at(3)}};
  after["added"].config_time = at(4);
  EXPECT_EQ(servekit::changes_between(before, after),
            (repository_changes{{"added"}, {"edited", "new_version"}, {"gone"}}));
  EXPECT_TRUE(servekit::changes_between(after, after).empty());
  // A config that disappears (or appears) is a change too.
  repository_scan no_config = after;
  no_config["kept"].config_time.reset();
  EXPECT_EQ(servekit::changes_between(after, no_config).changed, std::vector<std::string>{"kept"});
}

TEST(RepositoryPoll, ScanStampsModelFoldersOnly) {
  temp_repository dir;
  dir.write("m", add_config);
  dir.add_folder("m", "3");
  dir.add_folder("m", "notes"); // not a version folder
  dir.add_folder(".git", "objects");
  dir.add_folder("no_config", "1");
  std::filesystem::last_write_time(dir.root() / "m" / "config.json", at(7));
  std::filesystem::last_write_time(dir.root() / "m" / "3", at(8));
  const auto scan = servekit::scan_repository(dir.root());
  ASSERT_EQ(scan.size(), 2U);
  EXPECT_EQ(scan.at("m").config_time, at(7));
  ASSERT_EQ(scan.at("m").versions.size(), 1U);
  EXPECT_EQ(scan.at("m").versions[0], std::make_pair(std::string{"3"}, at(8)));
  EXPECT_FALSE(scan.at("no_config").config_time.has_value());
  // A file rewritten in place inside a version folder changes the version's stamp (as Triton's
  // poll, which takes the latest time under the folder).
  { std::ofstream{dir.root() / "m" / "3" / "model.bin"} << "weights"; }
  std::filesystem::last_write_time(dir.root() / "m" / "3" / "model.bin", at(9));
  std::filesystem::last_write_time(dir.root() / "m" / "3", at(8));
  const auto rescan = servekit::scan_repository(dir.root());
  EXPECT_EQ(rescan.at("m").versions[0].second, at(9));
  EXPECT_EQ(servekit::changes_between(scan, rescan).changed, std::vector<std::string>{"m"});
  // So does a labels file beside config.json.
  { std::ofstream{dir.root() / "m" / "labels.txt"} << "cat\ndog\n"; }
  std::filesystem::last_write_time(dir.root() / "m" / "labels.txt", at(10));
  const auto labelled = servekit::scan_repository(dir.root());
  EXPECT_EQ(labelled.at("m").other_files_time, at(10));
  EXPECT_EQ(labelled.at("m").config_time, at(7));
  EXPECT_EQ(servekit::changes_between(rescan, labelled).changed, std::vector<std::string>{"m"});
  EXPECT_TRUE(servekit::scan_repository(dir.root() / "missing").empty());
}

TEST(RepositoryPoll, PollLoadsReloadsAndUnloads) {
  temp_repository dir;
  dir.write("a", add_config);
  servekit::model_repository repo{dir.root(), backends{}};
  (void)repo.load_all();
  servekit::repository_poller poller{repo, std::chrono::hours{1}};
  poller.baseline();
  EXPECT_TRUE(poller.poll_once().empty());

  dir.write("b", add_config);
  EXPECT_EQ(poller.poll_once().added, std::vector<std::string>{"b"});
  EXPECT_NE(repo.find("b"), nullptr);

  const auto served = repo.find("a");
  dir.write("a", R"({"backend": "add", "max_batch_size": 4})");
  std::filesystem::last_write_time(dir.root() / "a" / "config.json", at(100));
  EXPECT_EQ(poller.poll_once().changed, std::vector<std::string>{"a"});
  ASSERT_NE(repo.find("a"), nullptr);
  EXPECT_NE(repo.find("a"), served); // reloaded: a new model serves
  EXPECT_EQ(repo.find("a")->options().max_batch_size, 4);

  dir.remove("b");
  EXPECT_EQ(poller.poll_once().removed, std::vector<std::string>{"b"});
  EXPECT_EQ(repo.find("b"), nullptr);
  EXPECT_EQ(repo.status_of("b")->reason, "unloaded");
  EXPECT_TRUE(repo.all_ready());

  // A broken folder is a model that fails (not ready) until it is fixed or removed.
  dir.write("broken", R"({"backend": "add", "max_batch_size": "eight"})");
  EXPECT_EQ(poller.poll_once().added, std::vector<std::string>{"broken"});
  EXPECT_FALSE(repo.all_ready());
  dir.remove("broken");
  EXPECT_EQ(poller.poll_once().removed, std::vector<std::string>{"broken"});
  EXPECT_TRUE(repo.all_ready());
}

TEST(RepositoryPoll, StartAndStopPromptly) {
  temp_repository dir;
  servekit::model_repository repo{dir.root(), backends{}};
  servekit::repository_poller poller{repo, std::chrono::hours{1}};
  const auto t0 = std::chrono::steady_clock::now();
  poller.start();
  poller.stop();
  poller.stop(); // idempotent
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds{5});
  servekit::repository_poller never{repo, std::chrono::milliseconds{0}};
  never.start(); // interval 0: no thread, nothing to wait for
  never.stop();
}

} // namespace repository_poller_test
