// A child `inferd serve` for one `inferd tune` candidate: started on free
// loopback ports (read back from its log), ready once the model answers
// /v2/models/{m}/ready, stopped with SIGTERM (SIGKILL after a bound). The
// child gets SIGTERM if this process dies first (PR_SET_PDEATHSIG), so a
// killed tune leaves no server behind.
//
// Thread-safety: one owner thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace inferd::tune {

struct ServerProcessOptions {
  std::string binary;      // the inferd executable
  std::string repository;  // the candidate's repository
  std::string model;
  std::string log_path;                 // the child's stdout and stderr
  std::vector<std::string> extra_args;  // more `serve` flags
  double start_timeout_s = 300;         // until the model is ready
};

class ServerProcess {
 public:
  // Starts the server and waits until the model is ready; an error (with the
  // model's load error or the log's tail) when it exits, fails the model or
  // is not ready in time.
  static Result<std::unique_ptr<ServerProcess>> Start(const ServerProcessOptions& options);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  uint16_t http_port() const { return http_port_; }
  uint16_t grpc_port() const { return grpc_port_; }  // 0: no gRPC port
  // The CPU time the server used so far (user + system, all threads), or -1.
  double CpuSeconds() const;
  // SIGTERM, then SIGKILL after `grace_s`; idempotent.
  void Stop(double grace_s = 10);
  // The last `bytes` of its log.
  std::string LogTail(size_t bytes = 2000) const;

 private:
  ServerProcess(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  Status WaitForPorts(double deadline_s, bool need_grpc);
  Status WaitForModel(const std::string& model, double deadline_s);
  bool Exited();

  pid_t pid_;
  std::string log_path_;
  uint16_t http_port_ = 0;
  uint16_t grpc_port_ = 0;
};

}  // namespace inferd::tune
