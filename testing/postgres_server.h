// PostgresServer: a throwaway PostgreSQL server for tests: initdb into a
// temporary directory, pg_ctl on a free loopback port, trust authentication;
// stopped and removed with the object. As root it runs as the `postgres`
// user (initdb refuses root). Debian's postgresql-15 provides the binaries;
// pg_ctl -w waits (bounded) until it accepts connections. Tests only.
//
// Thread-safety: none.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "testing/free_port.h"
#include "testing/temp_dir.h"

namespace inferd::testing {

class PostgresServer {
 public:
  static constexpr const char* kBin = "/usr/lib/postgresql/15/bin";

  PostgresServer() {
    if (!std::filesystem::exists(std::string(kBin) + "/initdb")) {
      error_ = "postgresql-15 is not installed";
      return;
    }
    port_ = FreePort();
    if (::geteuid() == 0) {
      as_user_ = "runuser -u postgres -- ";
      if (Run("chown postgres " + dir_.path()) != 0) error_ = "cannot chown the data directory";
    }
    if (error_.empty() && Run(as_user_ + kBin + "/initdb -D " + data() +
                              " -U postgres --auth=trust -E UTF8 --no-sync > " + dir_.path() + "/initdb.log 2>&1") != 0)
      error_ = "initdb failed";
    if (error_.empty() && !Start()) error_ = "pg_ctl start failed";
  }
  ~PostgresServer() {
    if (error_.empty()) Stop("immediate");
  }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // Empty when the server runs.
  const std::string& error() const { return error_; }
  std::string conninfo() const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " user=postgres dbname=postgres connect_timeout=5";
  }
  bool Start() {
    return Run(as_user_ + kBin + "/pg_ctl -D " + data() + " -w -t 60 -l " + dir_.path() + "/log -o \"-p " +
               std::to_string(port_) + " -c listen_addresses=127.0.0.1 -c unix_socket_directories=" + dir_.path() +
               " -c fsync=off\" start > /dev/null") == 0;
  }
  bool Stop(const char* mode = "fast") {
    return Run(as_user_ + kBin + "/pg_ctl -D " + data() + " -w -t 60 -m " + mode + " stop > /dev/null") == 0;
  }
  // Runs SQL with psql; its exit status.
  int Sql(const std::string& sql) const {
    return Run("psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p " + std::to_string(port_) +
               " -U postgres -d postgres -c \"" + sql + "\" > /dev/null");
  }

 private:
  std::string data() const { return dir_.path() + "/data"; }
  static int Run(const std::string& cmd) { return std::system(cmd.c_str()); }

  TempDir dir_;
  int port_ = 0;
  std::string as_user_;
  std::string error_;
};

}  // namespace inferd::testing
