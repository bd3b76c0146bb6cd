#include "backends/python/worker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

extern char** environ;

namespace inferd {
namespace {

std::string ErrnoText(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

int MillisUntil(WorkerProcess::Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > 1000000000 ? 1000000000 : static_cast<int>(left.count());
}

// The environment for the child: the server's, with `overrides` set.
std::vector<std::string> ChildEnvironment(const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  for (const auto& [k, v] : overrides) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// Moves `fd` to a descriptor >= 100 (close-on-exec) so that dup2 onto 3, 4,
// 5 in the child never overwrites another source.
Result<int> HighFd(int fd) {
  int high = fcntl(fd, F_DUPFD_CLOEXEC, 100);
  if (high < 0) return Status::Internal(ErrnoText("fcntl(F_DUPFD_CLOEXEC)"));
  return high;
}

}  // namespace

Result<std::unique_ptr<WorkerProcess>> WorkerProcess::Spawn(const Options& options) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return Status::Internal(ErrnoText("socketpair"));
  std::unique_ptr<WorkerProcess> p(new WorkerProcess());
  p->sock_ = sv[0];
  p->max_frame_bytes_ = options.max_frame_bytes;
  timeval tv{};
  tv.tv_sec = options.send_timeout.count() / 1000;
  tv.tv_usec = static_cast<suseconds_t>((options.send_timeout.count() % 1000) * 1000);
  setsockopt(p->sock_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));

  std::vector<int> sources;  // closed after the spawn
  auto close_sources = [&] {
    close(sv[1]);
    for (int fd : sources) close(fd);
  };
  std::vector<int> child_fds = {sv[1]};
  child_fds.insert(child_fds.end(), options.pass_fds.begin(), options.pass_fds.end());
  for (int fd : child_fds) {
    auto high = HighFd(fd);
    if (!high.ok()) {
      close_sources();
      return high.status();
    }
    sources.push_back(*high);
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (size_t i = 0; i < sources.size(); ++i)
    posix_spawn_file_actions_adddup2(&actions, sources[i], 3 + static_cast<int>(i));
  posix_spawn_file_actions_addclosefrom_np(&actions, 3 + static_cast<int>(sources.size()));
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<std::string> argv_s = {options.executable};
  argv_s.insert(argv_s.end(), options.args.begin(), options.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = ChildEnvironment(options.env);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawn(&pid, options.executable.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close_sources();
  if (rc != 0) {
    return Status::Unavailable("cannot start " + options.executable + ": " + std::strerror(rc));
  }
  p->pid_ = pid;
  p->pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));  // -1 on kernels without it
  return p;
}

WorkerProcess::~WorkerProcess() {
  if (!reaped_ && pid_ > 0) {
    Kill();
    WaitExit(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  }
  if (sock_ >= 0) close(sock_);
  if (pidfd_ >= 0) close(pidfd_);
}

Status WorkerProcess::Send(std::string_view payload) {
  MutexLock lock(&send_mu_);
  std::string frame(4, '\0');
  const uint32_t n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) frame[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  frame.append(payload);
  size_t sent = 0;
  while (sent < frame.size()) {
    ssize_t w = send(sock_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return Status::Unavailable("the worker process (pid " + std::to_string(pid_) + ") reads nothing");
    if (w <= 0) return Status::Unavailable("the worker process (pid " + std::to_string(pid_) + ") is gone");
    sent += static_cast<size_t>(w);
  }
  return Status::OK();
}

Status WorkerProcess::ReadExact(char* out, size_t n, Deadline deadline) {
  size_t got = 0;
  while (got < n) {
    pollfd pfd{sock_, POLLIN, 0};
    int rc = poll(&pfd, 1, MillisUntil(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) return Status::DeadlineExceeded("no answer in time");
    ssize_t r = recv(sock_, out + got, n - got, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return Status::Unavailable("the worker process closed its connection");
    got += static_cast<size_t>(r);
  }
  return Status::OK();
}

Result<std::string> WorkerProcess::Receive(Deadline deadline) {
  unsigned char head[4];
  INFERD_RETURN_IF_ERROR(ReadExact(reinterpret_cast<char*>(head), 4, deadline));
  const size_t n = head[0] | (head[1] << 8) | (head[2] << 16) | (static_cast<size_t>(head[3]) << 24);
  if (n > max_frame_bytes_) {
    return Status::Internal("the worker process sent a message of " + std::to_string(n) + " bytes (limit " +
                            std::to_string(max_frame_bytes_) + ")");
  }
  std::string payload(n, '\0');
  INFERD_RETURN_IF_ERROR(ReadExact(payload.data(), n, deadline));
  return payload;
}

void WorkerProcess::Kill() {
  if (reaped_ || pid_ <= 0) return;
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
}

bool WorkerProcess::WaitExit(Deadline deadline) {
  if (reaped_ || pid_ <= 0) return true;
  if (pidfd_ >= 0) {
    for (;;) {
      pollfd pfd{pidfd_, POLLIN, 0};
      int rc = poll(&pfd, 1, MillisUntil(deadline));
      if (rc < 0 && errno == EINTR) continue;
      if (rc == 0) return false;
      break;
    }
  } else {
    Kill();
  }
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  reaped_ = true;
  wait_status_ = status;
  return true;
}

std::string WorkerProcess::ExitDescription() const {
  if (!reaped_) return "is running";
  if (WIFEXITED(wait_status_)) return "exited with status " + std::to_string(WEXITSTATUS(wait_status_));
  if (WIFSIGNALED(wait_status_)) {
    int sig = WTERMSIG(wait_status_);
    const char* name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
  }
  return "ended (status " + std::to_string(wait_status_) + ")";
}

}  // namespace inferd
