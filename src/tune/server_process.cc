#include "tune/server_process.h"

#include <fcntl.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench/http_client.h"

namespace inferd::tune {

namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Polling interval while the child starts: the child's log and its HTTP port
// are all there is to watch (no event to wait on across processes).
void Pause() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

// "... <what> service listening on 127.0.0.1:PORT ..." -> PORT, or 0.
uint16_t PortAfter(const std::string& log, const std::string& what) {
  const std::string key = what + " service listening on ";
  const size_t at = log.find(key);
  if (at == std::string::npos) return 0;
  const size_t colon = log.find(':', at + key.size());
  const size_t eol = log.find('\n', at);
  if (colon == std::string::npos || (eol != std::string::npos && colon > eol)) return 0;
  unsigned long port = 0;
  try {
    port = std::stoul(log.substr(colon + 1, 6));
  } catch (...) {
    return 0;
  }
  return port > 0 && port < 65536 ? static_cast<uint16_t>(port) : 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

Result<std::unique_ptr<ServerProcess>> ServerProcess::Start(const ServerProcessOptions& o) {
  std::vector<std::string> args = {
      o.binary,      "serve", "--model-repository", o.repository, "--host",      "127.0.0.1", "--http-port", "0",
      "--grpc-port", "0",     "--allow-metrics",    "false",      "--log-level", "info"};
  args.insert(args.end(), o.extra_args.begin(), o.extra_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = ::open(o.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::Internal("cannot write " + o.log_path);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    return Status::Internal("fork failed");
  }
  if (pid == 0) {  // only async-signal-safe calls until exec
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    if (null_fd >= 0) ::dup2(null_fd, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  std::unique_ptr<ServerProcess> p(new ServerProcess(pid, o.log_path));
  const double deadline = Now() + o.start_timeout_s;
  bool need_grpc = true;  // unless the extra flags turn gRPC off
  for (size_t i = 0; i + 1 < o.extra_args.size(); ++i)
    if (o.extra_args[i] == "--allow-grpc") need_grpc = o.extra_args[i + 1] != "false" && o.extra_args[i + 1] != "0";
  Status st = p->WaitForPorts(deadline, need_grpc);
  if (st.ok()) st = p->WaitForModel(o.model, deadline);
  if (!st.ok()) {
    p->Stop(2);
    return Status(st.code(), st.message() + "\n--- the server's log (last lines) ---\n" + p->LogTail());
  }
  return p;
}

ServerProcess::~ServerProcess() { Stop(); }

bool ServerProcess::Exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return true;
  }
  return false;
}

Status ServerProcess::WaitForPorts(double deadline, bool need_grpc) {
  for (;;) {
    const std::string log = ReadFile(log_path_);
    http_port_ = PortAfter(log, "HTTP");
    grpc_port_ = PortAfter(log, "gRPC");
    if (http_port_ != 0 && (grpc_port_ != 0 || !need_grpc)) return Status::OK();
    if (Exited()) return Status::Unavailable("the server exited while starting");
    if (Now() > deadline) return Status::DeadlineExceeded("the server did not listen in time");
    Pause();
  }
}

Status ServerProcess::WaitForModel(const std::string& model, double deadline) {
  bench::HttpClient client("127.0.0.1", http_port_);
  for (;;) {
    auto r = client.Request("GET", "/v2/models/" + model + "/ready", "");
    if (r.ok() && r->status == 200) return Status::OK();
    // A version that failed to load says why in the index.
    auto index = client.Request("POST", "/v2/repository/index", "{}");
    if (index.ok() && index->status == 200) {
      rapidjson::Document d;
      d.Parse(index->body.data(), index->body.size());
      if (!d.HasParseError() && d.IsArray()) {
        for (const auto& m : d.GetArray()) {
          if (!m.IsObject() || !m.HasMember("name") || !m["name"].IsString() || model != m["name"].GetString())
            continue;
          const std::string state = m.HasMember("state") && m["state"].IsString() ? m["state"].GetString() : "";
          const std::string reason = m.HasMember("reason") && m["reason"].IsString() ? m["reason"].GetString() : "";
          if ((state == "UNAVAILABLE" || state == "FAILED") && !reason.empty())
            return Status::FailedPrecondition("the model did not load: " + reason);
        }
      }
    }
    if (Exited()) return Status::Unavailable("the server exited while loading the model");
    if (Now() > deadline) return Status::DeadlineExceeded("the model was not ready in time");
    Pause();
  }
}

double ServerProcess::CpuSeconds() const {
  if (pid_ <= 0) return -1;
  const std::string stat = ReadFile("/proc/" + std::to_string(pid_) + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream in(stat.substr(paren + 1));
  std::string field;
  double utime = -1, stime = -1;
  // After the command's name: state is field 3; utime 14, stime 15.
  for (int i = 3; i <= 15 && (in >> field); ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  if (utime < 0 || stime < 0) return -1;
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

void ServerProcess::Stop(double grace_s) {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const double deadline = Now() + grace_s;
  while (!Exited()) {
    if (Now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
      return;
    }
    Pause();
  }
}

std::string ServerProcess::LogTail(size_t bytes) const {
  const std::string log = ReadFile(log_path_);
  return log.size() <= bytes ? log : log.substr(log.size() - bytes);
}

}  // namespace inferd::tune
