// JobManager: the batch jobs of a running server (POST/GET/DELETE /v2/jobs):
// validates and queues submitted jobs, runs at most `max_running` at once on
// its own threads (each job's requests go to the model as background work),
// keeps a record of every job and its progress, and persists the records so
// a job that a restart interrupted resumes from its checkpoint.
//
// Job records (JSON) live in `<state_dir>/<id>.json`; without a state dir
// they are kept in memory only (a restart forgets the jobs; their sinks keep
// their checkpoints). The document a client sees (JobToJson) carries the
// spec (connection names and paths, never credentials), the state, counts,
// rate, ETA and the last row errors.
//
// Thread-safety: all public methods are thread-safe. Submit blocks while it
// validates (it may load the model): call it off I/O threads.
// Ownership: the submitter and clock must outlive the manager.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/request_submitter.h"
#include "jobs/job_runner.h"
#include "jobs/job_stores.h"

namespace inferd::jobs {

struct JobManagerOptions {
  std::string state_dir;       // "" = records in memory only
  int max_running = 2;         // jobs running at once; more wait queued
  size_t max_finished = 1000;  // finished job records kept (the oldest go)
};

class JobManager {
 public:
  JobManager(JobManagerOptions options, JobsConfig config, RequestSubmitter* submitter, Clock* clock);
  ~JobManager();

  // Reads the records in state_dir; jobs not finished are queued to resume.
  // Starts the worker threads. FAILED_PRECONDITION when the directory
  // cannot be created.
  Status Start();
  // Interrupts running jobs (they resume after a restart) and joins the
  // workers; queued jobs stay queued in their records. Idempotent.
  void Shutdown();

  // Parses and validates the spec (INVALID_ARGUMENT, PERMISSION_DENIED,
  // NOT_FOUND for an unknown model) and queues the job: its document.
  Result<std::string> Submit(std::string_view spec_json);
  Result<std::string> Get(const std::string& id) const;  // NOT_FOUND
  std::string List() const;                              // {"jobs": [...]} newest first
  // Cancels a queued or running job (a running one stops at its next
  // commit); a finished job is left as it is. Its document.
  Result<std::string> Cancel(const std::string& id);

  // For metrics: jobs by state.
  std::map<JobState, int> CountByState() const;

 private:
  struct Job;
  // A job's record file to write (`json`) or remove (empty), numbered per job
  // so that an older snapshot never overwrites a newer one.
  struct RecordWrite {
    std::string id;
    std::string json;
    uint64_t version = 0;
  };
  void Work();
  std::string ToJson(const Job& job) const;
  // The job's record as it is now; Write puts it on disk after mu_ is released.
  RecordWrite Snapshot(Job& job) const TSA_REQUIRES(mu_);
  void Write(const RecordWrite& record) TSA_EXCLUDES(mu_, files_mu_);
  // Drops the oldest finished jobs beyond max_finished; returns the removals of their records.
  std::vector<RecordWrite> TrimFinished() TSA_REQUIRES(mu_);

  const JobManagerOptions options_;
  const JobStores stores_;
  RequestSubmitter* submitter_;
  Clock* clock_;

  mutable Mutex mu_;
  CondVar cv_;
  std::map<std::string, std::shared_ptr<Job>> jobs_ TSA_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Job>> queue_ TSA_GUARDED_BY(mu_);
  bool stopping_ TSA_GUARDED_BY(mu_) = false;
  bool started_ TSA_GUARDED_BY(mu_) = false;
  uint64_t sequence_ TSA_GUARDED_BY(mu_) = 0;
  // Orders the record files' writes: held across a file write and rename (it
  // exists for that), never with mu_, so status reads never wait for a disk.
  Mutex files_mu_ TSA_ACQUIRED_AFTER(mu_);
  std::map<std::string, uint64_t> written_ TSA_GUARDED_BY(files_mu_);  // id -> version on disk
  std::vector<std::thread> workers_;
};

}  // namespace inferd::jobs
