// JobRunner: runs one batch prediction job to its end: reads the source,
// encodes rows into requests, submits them to the model through the server
// (RequestSubmitter) as background work with at most `max_in_flight`
// requests outstanding, and commits answers to the sink in source order,
// each commit carrying the checkpoint. A job that stops for any reason
// (SIGKILL, a server restart, a failure) runs again from its checkpoint:
// every key is written exactly once.
//
// Rows: a row that cannot be read or encoded, or whose request fails, is a
// row error (its key, its message), committed with the rows; more than
// max_row_errors in one run fail the job. When a request of several rows
// fails, its rows are retried one by one, so only the bad rows are errors.
// A model that is overloaded (UNAVAILABLE) is retried with backoff; one that
// is gone (NOT_FOUND) fails the job.
//
// Thread-safety: Run is called once, on a thread of the caller's; Cancel,
// Interrupt and Progress may be called from any thread meanwhile.
// Ownership: the stores, submitter and clock must outlive the runner.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/request_submitter.h"
#include "jobs/job_spec.h"
#include "jobs/job_stores.h"
#include "jobs/prediction_sink.h"
#include "jobs/row_encoder.h"

namespace inferd::jobs {

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled, kInterrupted };
std::string_view JobStateName(JobState s);
bool IsFinal(JobState s);  // succeeded, failed, cancelled

struct JobProgress {
  JobState state = JobState::kQueued;
  std::string message;  // why it failed, what it is doing
  // Committed (survive a restart); rows_done counts source rows handled.
  int64_t rows_done = 0;
  int64_t rows_written = 0;
  int64_t row_errors = 0;
  int64_t rows_resumed = 0;           // rows_done at the start of this run (from the checkpoint)
  std::optional<int64_t> rows_total;  // when the source knows it
  std::optional<double> fraction;     // rows_done / total, or the share of the file read
  double rows_per_second = 0;         // this run
  std::optional<double> eta_seconds;
  double elapsed_seconds = 0;               // this run
  std::vector<RowError> recent_errors;      // the last few (at most 10)
  std::vector<std::string> model_versions;  // versions that answered
};

class JobRunner {
 public:
  JobRunner(std::string id, JobSpec spec, const JobStores* stores, RequestSubmitter* submitter, Clock* clock);
  ~JobRunner();

  // Checks the job against the model, the source and the stores without
  // writing anything: opens the source, describes the model (which may load
  // it), matches the mapping. INVALID_ARGUMENT / PERMISSION_DENIED /
  // NOT_FOUND say what is wrong. Run calls it when it was not called.
  Status Validate();
  // Validate, then the mapping judged on the source's first row
  // (RowEncoder::CheckMapping): for a runner made only to check a spec at
  // submit, since it reads that row.
  Status ValidateWithFirstRow();
  // Runs the job; returns its final status (OK = succeeded). A cancelled
  // job answers CANCELLED, an interrupted one UNAVAILABLE (resumable).
  Status Run();
  // Stops reading; answers in flight are still committed. Final: CANCELLED.
  void Cancel();
  // The same, for a server stopping: the job is left to resume (INTERRUPTED).
  void Interrupt();
  JobProgress Progress() const;

  const std::string& id() const { return id_; }
  const JobSpec& spec() const { return spec_; }

 private:
  struct Unit;
  struct Retry;
  Status Prepare();
  Status Loop();
  // Fills a unit with up to rows_per_request rows; false when the source ended.
  Result<bool> Fill(Unit* unit, RowEncoder::Batch* batch);
  void Submit(const std::shared_ptr<Unit>& unit, std::unique_ptr<InferRequest> request, std::vector<size_t> rows);
  void OnAnswer(const std::shared_ptr<Unit>& unit, std::vector<size_t> rows, Result<InferResponse> answer);
  // Requests to send again (rows of a failed request one by one, requests
  // the model refused while overloaded once their backoff passed); the
  // caller submits them after releasing mu_.
  std::vector<Retry> TakeRetries() TSA_REQUIRES(mu_);
  // Waits (mu_ held) until an answer or a retry's time comes.
  void WaitForAnswers() TSA_REQUIRES(mu_);
  // Records a row error against the budget.
  void AddRowError(Unit* unit, RowError error) TSA_REQUIRES(mu_);
  // Commits the finished units at the front (all of them with `all`, else
  // once commit_rows rows gathered). Takes mu_ itself.
  Status CommitReady(bool all, bool finished);
  bool Stopping() const { return stop_.load() != Stop::kNo; }

  const std::string id_;
  const JobSpec spec_;
  const JobStores* stores_;
  RequestSubmitter* submitter_;
  Clock* clock_;

  std::unique_ptr<RowSource> source_;
  std::unique_ptr<PredictionSink> sink_;
  std::optional<RowEncoder> encoder_;

  enum class Stop { kNo, kCancel, kInterrupt };
  std::atomic<Stop> stop_{Stop::kNo};

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<std::shared_ptr<Unit>> units_ TSA_GUARDED_BY(mu_);  // in source order, not yet committed
  int64_t in_flight_ TSA_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<std::shared_ptr<Unit>, std::vector<size_t>>> split_ TSA_GUARDED_BY(mu_);
  std::vector<std::pair<std::shared_ptr<Unit>, std::vector<size_t>>> overloaded_ TSA_GUARDED_BY(mu_);
  TimePoint retry_at_ TSA_GUARDED_BY(mu_);         // overloaded_ go again from then
  int overload_attempts_ TSA_GUARDED_BY(mu_) = 0;  // consecutive refusals
  bool validated_ = false;
  int64_t read_end_ = 0;                        // job thread: the ordinal after the last row read
  Status fatal_ TSA_GUARDED_BY(mu_);            // a job-level failure from an answer
  int64_t run_errors_ TSA_GUARDED_BY(mu_) = 0;  // row errors in this run (the budget)
  JobProgress progress_ TSA_GUARDED_BY(mu_);
  TimePoint started_ TSA_GUARDED_BY(mu_);
};

}  // namespace inferd::jobs
