// RedisServer: a throwaway Redis server for tests: redis-server on a free
// loopback port with no persistence, its files in a temporary directory;
// shut down with the object. Start() returns once the server logs that it
// accepts connections (its output is read until then: no polling). Debian's
// redis-server provides the binary; redis-cli runs commands. Tests only.
//
// Thread-safety: none.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "testing/free_port.h"
#include "testing/temp_dir.h"

namespace inferd::testing {

class RedisServer {
 public:
  RedisServer() {
    if (!std::filesystem::exists("/usr/bin/redis-server")) {
      error_ = "redis-server is not installed";
      return;
    }
    port_ = FreePort();
    if (!Start()) error_ = "redis-server did not start";
  }
  ~RedisServer() { Stop(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  const std::string& error() const { return error_; }
  int port() const { return port_; }

  bool Start() {
    const std::string cmd = "exec /usr/bin/redis-server --port " + std::to_string(port_) +
                            " --bind 127.0.0.1 --save '' --appendonly no --daemonize no --dir " + dir_.path() +
                            " --logfile '' 2>&1";
    proc_ = ::popen(cmd.c_str(), "r");
    if (proc_ == nullptr) return false;
    char line[1024];
    while (std::fgets(line, sizeof line, proc_) != nullptr) {  // ends when redis-server exits
      if (std::string(line).find("Ready to accept connections") != std::string::npos) return true;
    }
    ::pclose(proc_);
    proc_ = nullptr;
    return false;
  }
  // SHUTDOWN NOSAVE, then waits for the process to end.
  void Stop() {
    if (proc_ == nullptr) return;
    Cli("SHUTDOWN NOSAVE");
    ::pclose(proc_);  // reads its remaining output and waits for it
    proc_ = nullptr;
  }
  // Runs a redis-cli command line (arguments as the shell splits them); its exit status.
  int Cli(const std::string& args) const {
    return std::system(("timeout 60 redis-cli -p " + std::to_string(port_) + " " + args + " > /dev/null 2>&1").c_str());
  }

 private:
  TempDir dir_;
  int port_ = 0;
  FILE* proc_ = nullptr;
  std::string error_;
};

}  // namespace inferd::testing
