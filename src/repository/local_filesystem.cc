// The local disk behind the Filesystem interface (std::filesystem).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "repository/filesystem.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;

class Local final : public Filesystem {
 public:
  Result<std::vector<Entry>> List(const std::string& dir) const override {
    std::error_code ec;
    fs::directory_iterator it(dir, ec);
    if (ec) return Status::NotFound(ec.message());
    std::vector<Entry> out;
    for (; it != fs::directory_iterator(); it.increment(ec)) {
      if (ec) break;
      std::error_code ec2;
      out.push_back({it->path().filename().string(), it->is_directory(ec2)});
    }
    std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
    return out;
  }

  bool IsDirectory(const std::string& path) const override {
    std::error_code ec;
    return fs::is_directory(path, ec);
  }

  bool IsFile(const std::string& path) const override {
    std::error_code ec;
    return fs::is_regular_file(path, ec);
  }

  Result<std::string> ReadFile(const std::string& path) const override {
    if (!IsFile(path)) return Status::NotFound("'" + path + "' does not exist");
    std::ifstream f(path, std::ios::binary);
    if (!f) return Status::InvalidArgument("cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  std::vector<FileInfo> ListFilesRecursive(const std::string& dir) const override {
    std::vector<FileInfo> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      std::error_code ec2;
      if (!it->is_regular_file(ec2)) continue;
      FileInfo f;
      f.path = it->path().string();
      f.bytes = it->file_size(ec2);
      f.modified = static_cast<int64_t>(it->last_write_time(ec2).time_since_epoch().count());
      out.push_back(std::move(f));
    }
    std::sort(out.begin(), out.end(), [](const FileInfo& a, const FileInfo& b) { return a.path < b.path; });
    return out;
  }

  Result<std::string> LocalPath(const std::string& path) const override { return path; }
};

}  // namespace

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

uint64_t TotalBytes(const Filesystem& fs, const std::string& dir) {
  uint64_t total = 0;
  for (const auto& f : fs.ListFilesRecursive(dir)) total += f.bytes;
  return total;
}

std::shared_ptr<const Filesystem> LocalFilesystem() { return std::make_shared<Local>(); }

}  // namespace inferd
