// TempDir: a fresh directory under $TMPDIR (or /tmp), removed with its
// contents when the object goes. Tests only. Not thread-safe.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace inferd::testing {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/inferd-test-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Empty when the directory could not be made.
  const std::string& path() const { return path_; }
  std::string Join(std::string_view rel) const { return (std::filesystem::path(path_) / rel).string(); }
  // Writes `bytes` to <path>/<rel>, making parent folders.
  bool Write(std::string_view rel, std::string_view bytes) const {
    const auto p = std::filesystem::path(path_) / rel;
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return static_cast<bool>(out);
  }

 private:
  std::string path_;
};

}  // namespace inferd::testing
