// JobStores: opens a job's source and sink through the operator's jobs
// config (jobs_config.h): named connections, allowed directories.
//
// Thread-safety: immutable after construction.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "jobs/job_spec.h"
#include "jobs/jobs_config.h"
#include "jobs/prediction_sink.h"
#include "jobs/prediction_store.h"
#include "jobs/row_source.h"

namespace inferd::jobs {

class JobStores {
 public:
  explicit JobStores(JobsConfig config) : config_(std::move(config)) {}

  // The file a spec's path names, made absolute; PERMISSION_DENIED outside
  // the allowed directories. `must_exist`: a source (the file itself must
  // resolve inside), else a sink (its directory must).
  Result<std::string> ResolvePath(const std::string& path, bool must_exist) const;
  // Checks every name in the spec (connections exist and have the right
  // type, paths are allowed) without opening anything.
  Status Check(const JobSpec& spec) const;

  Result<std::unique_ptr<RowSource>> OpenSource(const JobSpec& spec) const;
  Result<std::unique_ptr<PredictionSink>> OpenSink(const JobSpec& spec) const;

  // Hybrid serving's prediction store: `table` over the named connection
  // (sqlite, postgres or redis). CheckStore validates the names without opening
  // anything (a model's load calls it); OpenStore opens it (postgres: lazily,
  // so a server that is down does not fail it).
  Status CheckStore(const std::string& connection, const std::string& table) const;
  Result<std::unique_ptr<PredictionStore>> OpenStore(const std::string& connection, StoreTable table,
                                                     bool writable) const;

  const JobsConfig& config() const { return config_; }

 private:
  // The database file of an sqlite source or sink: its connection's, or its path's.
  Result<std::string> SqlitePath(const std::string& connection, const std::string& path, const char* what,
                                 bool must_exist) const;
  Result<const Connection*> Named(const std::string& name, StoreType type, const char* what) const;
  JobsConfig config_;
};

}  // namespace inferd::jobs
