#include "server/file_reloader.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "testing/fake_clock.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;

class FileReloaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("inferd_reloader_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    reloader_.reset();
    fs::remove_all(dir_);
  }
  static void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  // One check of the files: time moves past the interval and the thread waits again.
  void Tick() {
    clock_.Advance(std::chrono::seconds(1));
    clock_.AwaitWaitCalls(++waits_);
  }
  void Start(std::vector<FileReloader::Source> sources) {
    reloader_ = std::make_unique<FileReloader>(std::move(sources), std::chrono::seconds(1), &clock_);
    clock_.AwaitWaitCalls(++waits_);
  }

  fs::path dir_;
  testing::FakeClock clock_;
  int waits_ = 0;
  std::unique_ptr<FileReloader> reloader_;
};

TEST_F(FileReloaderTest, ReloadsASourceWhenOneOfItsFilesChangesAndOnlyThen) {
  Write(dir_ / "cert.pem", "one");
  Write(dir_ / "key.pem", "key");
  Write(dir_ / "tokens.json", "{}");
  std::atomic<int> tls{0}, tokens{0};
  Start({{"tls",
          {(dir_ / "cert.pem").string(), (dir_ / "key.pem").string()},
          [&] {
            ++tls;
            return Status::OK();
          }},
         {"tokens", {(dir_ / "tokens.json").string()}, [&] {
            ++tokens;
            return Status::OK();
          }}});
  Tick();
  EXPECT_EQ(tls, 0);  // nothing changed
  Write(dir_ / "key.pem", "new key");
  Tick();
  EXPECT_EQ(tls, 1);
  EXPECT_EQ(tokens, 0);
  Tick();
  EXPECT_EQ(tls, 1);  // seen once
  fs::remove(dir_ / "tokens.json");
  Tick();
  EXPECT_EQ(tokens, 0);  // a missing file waits to come back
  Write(dir_ / "tokens.json", "{\"tokens\": []}");
  Tick();
  EXPECT_EQ(tokens, 1);
  EXPECT_EQ(reloader_->reloads(), 2u);
}

TEST_F(FileReloaderTest, ASymlinkSwapIsAChange) {
  // A Kubernetes Secret volume: the watched path is a link to a folder the kubelet swaps.
  fs::create_directories(dir_ / "v1");
  fs::create_directories(dir_ / "v2");
  Write(dir_ / "v1" / "tokens.json", "same");
  Write(dir_ / "v2" / "tokens.json", "same");
  fs::create_directory_symlink(dir_ / "v1", dir_ / "data");
  std::atomic<int> n{0};
  Start({{"tokens", {(dir_ / "data" / "tokens.json").string()}, [&] {
            ++n;
            return Status::OK();
          }}});
  fs::remove(dir_ / "data");
  fs::create_directory_symlink(dir_ / "v2", dir_ / "data");
  Tick();
  EXPECT_EQ(n, 1);
}

TEST_F(FileReloaderTest, AFailedReloadIsCountedAndTriedAgainOnTheNextChange) {
  Write(dir_ / "tokens.json", "a");
  std::atomic<int> n{0};
  Start({{"tokens", {(dir_ / "tokens.json").string()}, [&] {
            ++n;
            return n == 1 ? Status::InvalidArgument("half written") : Status::OK();
          }}});
  Write(dir_ / "tokens.json", "ab");
  Tick();
  EXPECT_EQ(n, 1);
  EXPECT_EQ(reloader_->failures(), 1u);
  Tick();
  EXPECT_EQ(n, 1);  // not retried until the file changes again
  Write(dir_ / "tokens.json", "abc");
  Tick();
  EXPECT_EQ(n, 2);
  EXPECT_EQ(reloader_->reloads(), 1u);
}

TEST_F(FileReloaderTest, ReloadAllReloadsEverySourceAtOnce) {
  Write(dir_ / "a", "a");
  std::atomic<int> n{0};
  Start({{"a",
          {(dir_ / "a").string()},
          [&] {
            ++n;
            return Status::OK();
          }},
         {"b", {}, [&] {
            ++n;
            return Status::OK();
          }}});
  reloader_->ReloadAll();
  clock_.AwaitWaitCalls(++waits_);  // without time passing
  EXPECT_EQ(n, 2);
}

}  // namespace
}  // namespace inferd
