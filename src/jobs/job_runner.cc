#include "jobs/job_runner.h"

#include <algorithm>

namespace inferd::jobs {

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
    case JobState::kInterrupted:
      return "interrupted";
  }
  return "?";
}

bool IsFinal(JobState s) { return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled; }

// A slice of the source: the rows of one request (and the rows around them
// that became errors before any request). Committed in source order.
struct JobRunner::Unit {
  int64_t end_ordinal = 0;                        // the checkpoint once this unit is committed
  std::vector<std::string> keys;                  // per request row
  std::vector<int64_t> ordinals;                  // per request row
  std::vector<Tensor> inputs;                     // the request's inputs (rows are sliced from them for retries)
  std::vector<std::optional<ResultRow>> results;  // per request row
  std::vector<RowError> errors;
  int pending = 0;         // requests not answered yet (or waiting to be sent again)
  bool abandoned = false;  // the job stopped before its answer: never committed
};

struct JobRunner::Retry {
  std::shared_ptr<Unit> unit;
  std::vector<size_t> rows;
  std::unique_ptr<InferRequest> request;
};

JobRunner::JobRunner(std::string id, JobSpec spec, const JobStores* stores, RequestSubmitter* submitter, Clock* clock)
    : id_(std::move(id)), spec_(std::move(spec)), stores_(stores), submitter_(submitter), clock_(clock) {}

JobRunner::~JobRunner() {
  MutexLock l(&mu_);
  while (in_flight_ > 0) cv_.Wait(&mu_);  // no answer may outlive the runner
}

void JobRunner::Cancel() {
  Stop expected = Stop::kNo;
  stop_.compare_exchange_strong(expected, Stop::kCancel);
  MutexLock l(&mu_);
  cv_.NotifyAll();
}

void JobRunner::Interrupt() {
  Stop expected = Stop::kNo;
  stop_.compare_exchange_strong(expected, Stop::kInterrupt);
  MutexLock l(&mu_);
  cv_.NotifyAll();
}

JobProgress JobRunner::Progress() const {
  MutexLock l(&mu_);
  JobProgress p = progress_;
  if (p.state == JobState::kRunning) {
    p.elapsed_seconds = std::chrono::duration<double>(clock_->Now() - started_).count();
    if (stop_.load() == Stop::kCancel) p.message = "cancelling: stops after the requests in flight";
    if (stop_.load() == Stop::kInterrupt) p.message = "interrupting: stops after the requests in flight, resumes later";
  }
  const int64_t done = p.rows_done - p.rows_resumed;
  if (p.elapsed_seconds > 0) p.rows_per_second = static_cast<double>(done) / p.elapsed_seconds;
  if (p.rows_total && *p.rows_total > 0)
    p.fraction = std::min(1.0, static_cast<double>(p.rows_done) / static_cast<double>(*p.rows_total));
  if (p.state == JobState::kRunning && p.rows_per_second > 0 && p.rows_total) {
    p.eta_seconds = static_cast<double>(std::max<int64_t>(0, *p.rows_total - p.rows_done)) / p.rows_per_second;
  } else if (p.state == JobState::kRunning && p.fraction && *p.fraction > 0 && p.elapsed_seconds > 0 && done > 0) {
    p.eta_seconds = p.elapsed_seconds * (1.0 - *p.fraction) / *p.fraction;
  }
  return p;
}

Status JobRunner::Validate() {
  if (validated_) return Status::OK();
  INFERD_RETURN_IF_ERROR(stores_->Check(spec_));
  INFERD_ASSIGN_OR_RETURN(source_, stores_->OpenSource(spec_));
  INFERD_ASSIGN_OR_RETURN(ModelSpec model, submitter_->Describe(spec_.model, spec_.version));
  INFERD_ASSIGN_OR_RETURN(RowEncoder enc, RowEncoder::Make(spec_, model, source_->columns()));
  encoder_.emplace(std::move(enc));
  for (const auto& out : encoder_->outputs()) {
    if (out == spec_.key) return Status::InvalidArgument("job spec: the key column '" + out + "' has an output's name");
    for (const char* reserved : kReservedColumns)
      if (out == reserved || spec_.key == reserved)
        return Status::InvalidArgument(
            std::string("job spec: '") + reserved +
            "' is a column every prediction table has; the key and outputs need other names");
  }
  validated_ = true;
  return Status::OK();
}

Status JobRunner::ValidateWithFirstRow() {
  INFERD_RETURN_IF_ERROR(Validate());
  Row row;
  INFERD_ASSIGN_OR_RETURN(bool got, source_->Next(&row));
  return got ? encoder_->CheckMapping(row) : Status::OK();
}

Status JobRunner::Prepare() {
  INFERD_RETURN_IF_ERROR(Validate());
  INFERD_ASSIGN_OR_RETURN(sink_, stores_->OpenSink(spec_));
  INFERD_RETURN_IF_ERROR(sink_->Prepare(SinkSchema{spec_.key, encoder_->outputs()}));
  INFERD_ASSIGN_OR_RETURN(std::optional<Checkpoint> cp, sink_->ReadCheckpoint(id_));
  if (!cp || cp->finished) {
    INFERD_RETURN_IF_ERROR(sink_->Reset(id_));
    cp = Checkpoint{};
  }
  // Resume: the rows the checkpoint counts were handled; skip them.
  Row row;
  for (int64_t i = 0; i < cp->rows_done; ++i) {
    INFERD_ASSIGN_OR_RETURN(bool got, source_->Next(&row));
    if (!got) {
      return Status::FailedPrecondition("job '" + id_ + "': the checkpoint counts " + std::to_string(cp->rows_done) +
                                        " rows but the source now has " + std::to_string(i) +
                                        "; it changed since the job began");
    }
  }
  read_end_ = cp->rows_done;
  MutexLock l(&mu_);
  progress_.rows_done = progress_.rows_resumed = cp->rows_done;
  progress_.rows_written = cp->rows_written;
  progress_.row_errors = cp->row_errors;
  progress_.rows_total = source_->total_rows();
  return Status::OK();
}

Status JobRunner::Run() {
  {
    MutexLock l(&mu_);
    started_ = clock_->Now();
    progress_.state = JobState::kRunning;
  }
  Status st = Prepare();
  if (st.ok()) st = Loop();
  MutexLock l(&mu_);
  if (st.ok() && !fatal_.ok()) st = fatal_;
  progress_.elapsed_seconds = std::chrono::duration<double>(clock_->Now() - started_).count();
  // Interrupted while the server stopped under it (a request refused as the
  // server shuts down, the model already unloading): the job did not fail,
  // it resumes from its checkpoint at the next start.
  if (!st.ok() && st.code() == StatusCode::kUnavailable && stop_.load() == Stop::kInterrupt) st = Status::OK();
  if (!st.ok()) {
    progress_.state = JobState::kFailed;
    progress_.message = st.message();
    return st;
  }
  switch (stop_.load()) {
    case Stop::kCancel:
      progress_.state = JobState::kCancelled;
      progress_.message = "cancelled";
      return Status::Cancelled("job '" + id_ + "' was cancelled");
    case Stop::kInterrupt:
      progress_.state = JobState::kInterrupted;
      progress_.message = "interrupted; resumes from its checkpoint";
      return Status::Unavailable("job '" + id_ + "' was interrupted");
    case Stop::kNo:
      break;
  }
  progress_.state = JobState::kSucceeded;
  progress_.message = "";
  return Status::OK();
}

void JobRunner::AddRowError(Unit* unit, RowError error) {
  unit->errors.push_back(std::move(error));
  if (++run_errors_ > spec_.max_row_errors && fatal_.ok()) {
    fatal_ = Status::FailedPrecondition("job '" + id_ + "': more than max_row_errors (" +
                                        std::to_string(spec_.max_row_errors) +
                                        ") rows failed; the last: " + unit->errors.back().message);
    cv_.NotifyAll();
  }
}

Result<bool> JobRunner::Fill(Unit* unit, RowEncoder::Batch* batch) {
  const int64_t want = encoder_->rows_per_request();
  const size_t key_col = encoder_->key_column();
  Row row;
  bool more = true;
  unit->end_ordinal = read_end_;
  while (batch->rows < want) {
    INFERD_ASSIGN_OR_RETURN(bool got, source_->Next(&row));
    if (!got) {
      more = false;
      break;
    }
    unit->end_ordinal = read_end_ = row.ordinal + 1;
    std::string key = row.cells.size() > key_col ? CellText(row.cells[key_col]) : std::string();
    Status st;
    if (!row.error.empty()) {
      st = Status::InvalidArgument(row.error);
    } else if (key.empty()) {
      st = Status::InvalidArgument("the key column '" + spec_.key + "' is empty");
    } else {
      st = encoder_->Append(row, batch);
    }
    if (!st.ok()) {
      MutexLock l(&mu_);
      AddRowError(unit, RowError{row.ordinal, std::move(key), st.message()});
      if (!fatal_.ok()) break;
      continue;
    }
    unit->keys.push_back(std::move(key));
    unit->ordinals.push_back(row.ordinal);
  }
  unit->results.resize(unit->keys.size());
  return more;
}

void JobRunner::Submit(const std::shared_ptr<Unit>& unit, std::unique_ptr<InferRequest> request,
                       std::vector<size_t> rows) {
  request->id = id_;
  submitter_->Submit(std::move(request), [this, unit, rows = std::move(rows)](Result<InferResponse> answer) mutable {
    OnAnswer(unit, std::move(rows), std::move(answer));
  });
}

void JobRunner::OnAnswer(const std::shared_ptr<Unit>& unit, std::vector<size_t> rows, Result<InferResponse> answer) {
  MutexLock l(&mu_);
  --in_flight_;
  if (answer.ok()) {
    overload_attempts_ = 0;
    const InferResponse& resp = answer.value();
    if (std::find(progress_.model_versions.begin(), progress_.model_versions.end(), resp.model_version) ==
        progress_.model_versions.end())
      progress_.model_versions.push_back(resp.model_version);
    for (size_t k = 0; k < rows.size(); ++k) {
      const size_t r = rows[k];
      auto cells = encoder_->Decode(resp, static_cast<int64_t>(k), static_cast<int64_t>(rows.size()));
      if (cells.ok()) {
        unit->results[r] = ResultRow{unit->keys[r], resp.model_version, std::move(cells).value()};
      } else {
        AddRowError(unit.get(), RowError{unit->ordinals[r], unit->keys[r], cells.status().message()});
      }
    }
    --unit->pending;
  } else {
    const Status& st = answer.status();
    if (Stopping()) {
      unit->abandoned = true;  // not committed; the rows run again on resume
      --unit->pending;
    } else if (st.code() == StatusCode::kUnavailable) {
      overloaded_.emplace_back(unit, std::move(rows));  // still pending
      retry_at_ =
          clock_->Now() + std::min<Duration>(std::chrono::seconds(1),
                                             std::chrono::milliseconds(10 * (1 << std::min(overload_attempts_, 7))));
      if (++overload_attempts_ > 100 && fatal_.ok())
        fatal_ = Status::Unavailable("job '" + id_ + "': the model stayed unavailable: " + st.message());
    } else if (st.code() == StatusCode::kNotFound || st.code() == StatusCode::kCancelled ||
               st.code() == StatusCode::kUnauthenticated) {
      --unit->pending;
      unit->abandoned = true;
      if (fatal_.ok()) fatal_ = Status(st.code(), "job '" + id_ + "': " + st.message());
    } else if (rows.size() > 1) {
      split_.emplace_back(unit, std::move(rows));  // each row again, alone; still pending
    } else {
      --unit->pending;
      AddRowError(unit.get(), RowError{unit->ordinals[rows[0]], unit->keys[rows[0]], st.message()});
    }
  }
  cv_.NotifyAll();
}

std::vector<JobRunner::Retry> JobRunner::TakeRetries() {
  std::vector<Retry> out;
  for (auto& [unit, rows] : split_) {
    --unit->pending;
    if (Stopping() || !fatal_.ok()) {
      unit->abandoned = true;
      continue;
    }
    for (size_t r : rows) {
      auto req = std::make_unique<InferRequest>();
      req->model_name = spec_.model;
      req->model_version = spec_.version;
      req->background = true;
      bool ok = true;
      for (const Tensor& t : unit->inputs) {
        auto one = t.SliceRows(static_cast<int64_t>(r), 1);
        if (!one.ok()) {
          ok = false;
          break;
        }
        req->inputs.push_back(std::move(one).value());
      }
      if (!ok) {
        AddRowError(unit.get(), RowError{unit->ordinals[r], unit->keys[r], "cannot split the failed request"});
        continue;
      }
      for (const auto& o : encoder_->outputs()) req->outputs.push_back(RequestedOutput{o});
      ++unit->pending;
      out.push_back(Retry{unit, {r}, std::move(req)});
    }
  }
  split_.clear();
  if (!overloaded_.empty() && (Stopping() || !fatal_.ok() || clock_->Now() >= retry_at_)) {
    for (auto& [unit, rows] : overloaded_) {
      if (Stopping() || !fatal_.ok()) {
        --unit->pending;
        unit->abandoned = true;
        continue;
      }
      auto req = std::make_unique<InferRequest>();
      req->model_name = spec_.model;
      req->model_version = spec_.version;
      req->background = true;
      const bool all = rows.size() == unit->keys.size();
      for (const Tensor& t : unit->inputs) {
        if (all) {
          req->inputs.push_back(t);
        } else {
          auto one = t.SliceRows(static_cast<int64_t>(rows[0]), 1);  // only single rows are retried apart
          if (one.ok()) req->inputs.push_back(std::move(one).value());
        }
      }
      for (const auto& o : encoder_->outputs()) req->outputs.push_back(RequestedOutput{o});
      out.push_back(Retry{unit, std::move(rows), std::move(req)});  // pending already counted
    }
    overloaded_.clear();
  }
  in_flight_ += static_cast<int64_t>(out.size());
  return out;
}

void JobRunner::WaitForAnswers() {
  if (!split_.empty()) return;
  if (!overloaded_.empty()) {
    cv_.WaitUntil(&mu_, clock_, retry_at_);
  } else {
    cv_.Wait(&mu_);
  }
}

Status JobRunner::Loop() {
  const int64_t max_in_flight = spec_.max_in_flight;
  bool more = true;
  auto send = [this](std::vector<Retry> retries) {
    for (auto& r : retries) Submit(r.unit, std::move(r.request), std::move(r.rows));
  };
  while (more && !Stopping()) {
    {
      std::vector<Retry> retries;
      {
        MutexLock l(&mu_);
        while (fatal_.ok() && !Stopping() && in_flight_ >= max_in_flight && split_.empty() &&
               (overloaded_.empty() || clock_->Now() < retry_at_))
          WaitForAnswers();
        if (!fatal_.ok()) break;
        retries = TakeRetries();
      }
      send(std::move(retries));
      if (Stopping()) break;
    }
    auto unit = std::make_shared<Unit>();
    RowEncoder::Batch batch = encoder_->NewBatch();
    auto filled = Fill(unit.get(), &batch);
    if (!filled.ok()) {
      MutexLock l(&mu_);
      if (fatal_.ok()) fatal_ = filled.status();
      break;
    }
    more = filled.value();
    std::unique_ptr<InferRequest> request;
    if (batch.rows > 0) {
      request = encoder_->ToRequest(std::move(batch), spec_.model, spec_.version);
      unit->inputs = request->inputs;
    }
    std::vector<size_t> rows(unit->keys.size());
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = i;
    {
      MutexLock l(&mu_);
      units_.push_back(unit);
      if (request) {
        ++in_flight_;
        ++unit->pending;
      }
      if (const auto f = source_->fraction_read()) progress_.fraction = f;
    }
    if (request) Submit(unit, std::move(request), std::move(rows));
    INFERD_RETURN_IF_ERROR(CommitReady(/*all=*/false, /*finished=*/false));
    MutexLock l(&mu_);
    if (!fatal_.ok()) break;
  }
  // Drain: every request answered (retries included unless stopping).
  for (;;) {
    std::vector<Retry> retries;
    {
      MutexLock l(&mu_);
      if (in_flight_ == 0 && split_.empty() && overloaded_.empty()) break;
      if (split_.empty() && (overloaded_.empty() || (clock_->Now() < retry_at_ && !Stopping() && fatal_.ok()))) {
        if (in_flight_ > 0 || !overloaded_.empty()) WaitForAnswers();
      }
      retries = TakeRetries();
    }
    send(std::move(retries));
  }
  bool finished;
  {
    MutexLock l(&mu_);
    finished = !more && fatal_.ok() && !Stopping();
  }
  return CommitReady(/*all=*/true, finished);
}

Status JobRunner::CommitReady(bool all, bool finished) {
  std::vector<ResultRow> rows;
  std::vector<RowError> errors;
  int64_t end = -1;
  bool everything = false;
  {
    MutexLock l(&mu_);
    size_t ready = 0;
    int64_t count = 0;
    for (const auto& u : units_) {
      if (u->pending > 0 || u->abandoned) break;
      ++ready;
      count += static_cast<int64_t>(u->keys.size() + u->errors.size());
    }
    if (ready == 0 && !(all && finished && units_.empty())) return Status::OK();
    if (!all && count < spec_.commit_rows) return Status::OK();
    for (size_t i = 0; i < ready; ++i) {
      auto& u = units_.front();
      for (auto& r : u->results)
        if (r) rows.push_back(std::move(*r));
      for (auto& e : u->errors) errors.push_back(std::move(e));
      end = u->end_ordinal;
      units_.pop_front();
    }
    everything = units_.empty();
    if (end < 0) end = progress_.rows_done;
  }
  Checkpoint cp;
  {
    MutexLock l(&mu_);
    cp.rows_done = end;
    cp.rows_written = progress_.rows_written + static_cast<int64_t>(rows.size());
    cp.row_errors = progress_.row_errors + static_cast<int64_t>(errors.size());
  }
  cp.finished = finished && everything;
  INFERD_RETURN_IF_ERROR(sink_->Commit(id_, spec_.model, rows, errors, cp));
  MutexLock l(&mu_);
  progress_.rows_done = cp.rows_done;
  progress_.rows_written = cp.rows_written;
  progress_.row_errors = cp.row_errors;
  for (auto& e : errors) progress_.recent_errors.push_back(std::move(e));
  if (progress_.recent_errors.size() > 10)
    progress_.recent_errors.erase(progress_.recent_errors.begin(), progress_.recent_errors.end() - 10);
  return Status::OK();
}

}  // namespace inferd::jobs
