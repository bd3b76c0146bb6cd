// WorkerProcess: a child process started with posix_spawn, its control
// socket (frames of a 4-byte little-endian length and a payload) and its exit.
//
// The child gets the socket as fd 3 and `pass_fds` as fds 4, 5, ...; every
// other descriptor of the server is closed in it. It runs in its own process
// group (a terminal's Ctrl-C reaches the server, which stops it in order) and
// Kill() signals the whole group, so processes the child started die with it.
//
// Thread-safety: Send may be called from any thread (serialised by a mutex);
// Receive, Kill, Reap and WaitExit from one thread at a time (the owner's).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"

namespace inferd {

class WorkerProcess {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  struct Options {
    std::string executable;                                // e.g. /usr/bin/python3
    std::vector<std::string> args;                         // argv[1...]
    std::vector<std::pair<std::string, std::string>> env;  // set or replaced in the child's environment
    std::vector<int> pass_fds;                             // become fds 4, 5, ... in the child
    size_t max_frame_bytes = 64u << 20;                    // a longer frame from the child is an error
    std::chrono::milliseconds send_timeout{10000};         // a child that reads nothing this long is broken
  };

  static Result<std::unique_ptr<WorkerProcess>> Spawn(const Options& options);
  // Kills the child (if it still runs) and reaps it.
  ~WorkerProcess();

  pid_t pid() const { return pid_; }

  // One frame. Fails (UNAVAILABLE) once the child closed its end or a send
  // timed out.
  Status Send(std::string_view payload);
  // The next frame. DEADLINE_EXCEEDED when none came by `deadline`;
  // UNAVAILABLE when the child closed the socket (it exited or crashed);
  // INTERNAL for a frame over max_frame_bytes.
  Result<std::string> Receive(Deadline deadline);

  // SIGKILL to the child's process group.
  void Kill();
  // Waits for the child to exit until `deadline`; true once it has exited
  // (reaped). Without pidfd support, kills it and waits.
  bool WaitExit(Deadline deadline);
  // "exited with status 1", "was killed by signal 11 (Segmentation fault)";
  // "is running" before it was reaped.
  std::string ExitDescription() const;

  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

 private:
  WorkerProcess() = default;
  Status ReadExact(char* out, size_t n, Deadline deadline);

  pid_t pid_ = -1;
  int sock_ = -1;
  int pidfd_ = -1;
  bool reaped_ = false;
  int wait_status_ = 0;
  size_t max_frame_bytes_ = 0;
  // Serializes frames on the socket: held across send() on purpose, since a
  // frame must go out whole before another thread's starts. A send waits at
  // most Options::send_timeout (SO_SNDTIMEO), then the worker counts as gone.
  Mutex send_mu_;
};

}  // namespace inferd
