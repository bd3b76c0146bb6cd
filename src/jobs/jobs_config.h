// Where a job may read and write: named connections and allowed directories
// the operator configures at start-up (the jobs config file, `--jobs-config`),
// as data (JobStores opens sources and sinks through them).
//
//   {"connections": {"warehouse": {"type": "postgres", "conninfo": "host=db dbname=ml user=batch"},
//                    "features":  {"type": "sqlite", "path": "/srv/ml/features.db"},
//                    "online":    {"type": "redis", "host": "10.0.0.5", "port": 6379, "password": "...", "db": 0}},
//    "allowed_dirs": ["/srv/ml/jobs"]}
//
// A job names a connection (never its conninfo or credentials) or a file
// path; for the server a path must lie inside an allowed directory (relative
// paths are taken from the first one; no `..`, no symlink that leads out),
// else PERMISSION_DENIED. `inferd batch` runs in-process with the user's own
// rights and opens any path (unrestricted).
//
// Thread-safety: plain values.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "jobs/job_spec.h"

namespace inferd::jobs {

// The jobs config as data.
struct Connection {
  StoreType type = StoreType::kSqlite;
  std::string path;      // sqlite
  std::string conninfo;  // postgres (libpq connection string; never shown)
  // redis (online feature lookup, docs/features.md): host (default
  // 127.0.0.1), port (6379), password (AUTH; never shown), db (SELECT, 0).
  std::string host;
  int port = 6379;
  std::string password;
  int db = 0;
};

struct JobsConfig {
  std::map<std::string, Connection> connections;
  std::vector<std::string> allowed_dirs;  // canonical absolute paths
  bool unrestricted = false;              // any path (the in-process CLI)
};

// Parses the jobs config (INVALID_ARGUMENT naming the field); allowed
// directories must exist (they are made canonical).
Result<JobsConfig> ParseJobsConfig(std::string_view json);
Result<JobsConfig> LoadJobsConfig(const std::string& path);

}  // namespace inferd::jobs
