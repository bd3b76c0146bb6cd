#include "jobs/job_manager.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace inferd::jobs {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void Str(Writer& w, std::string_view s) { w.String(s.data(), static_cast<rapidjson::SizeType>(s.size())); }

std::optional<JobState> StateFromName(std::string_view s) {
  for (JobState st : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded, JobState::kFailed,
                      JobState::kCancelled, JobState::kInterrupted})
    if (JobStateName(st) == s) return st;
  return std::nullopt;
}

std::string NewId(uint64_t seq) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[48];
  std::snprintf(buf, sizeof buf, "job-%llu-%06llx", static_cast<unsigned long long>(seq),
                static_cast<unsigned long long>(rng() & 0xffffff));
  return buf;
}

}  // namespace

struct JobManager::Job {
  std::string id;
  JobSpec spec;
  uint64_t seq = 0;
  double created_at = 0;  // Unix seconds
  // The runner exists while the job runs; before and after, `progress`
  // holds its state (queued; or the final counts).
  std::unique_ptr<JobRunner> runner;
  JobProgress progress;
  uint64_t record_version = 0;  // snapshots of its record taken so far (under mu_)
};

JobManager::JobManager(JobManagerOptions options, JobsConfig config, RequestSubmitter* submitter, Clock* clock)
    : options_(std::move(options)), stores_(std::move(config)), submitter_(submitter), clock_(clock) {}

JobManager::~JobManager() { Shutdown(); }

Status JobManager::Start() {
  std::vector<std::shared_ptr<Job>> loaded;
  if (!options_.state_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options_.state_dir, ec);
    if (ec)
      return Status::FailedPrecondition("cannot create the jobs directory '" + options_.state_dir +
                                        "': " + ec.message());
    for (const auto& entry : std::filesystem::directory_iterator(options_.state_dir, ec)) {
      if (entry.path().extension() != ".json") continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string text = ss.str();
      rapidjson::Document doc;
      doc.Parse(text.data(), text.size());
      if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("id") || !doc["id"].IsString() ||
          !doc.HasMember("spec") || !doc["spec"].IsObject() || !doc.HasMember("state") || !doc["state"].IsString())
        continue;  // not a job record (or a torn one): left alone
      rapidjson::StringBuffer sb;
      Writer sw(sb);
      doc["spec"].Accept(sw);
      auto spec = ParseJobSpec(std::string_view(sb.GetString(), sb.GetSize()));
      auto state = StateFromName(doc["state"].GetString());
      if (!spec.ok() || !state) continue;
      auto job = std::make_shared<Job>();
      job->id = doc["id"].GetString();
      job->spec = std::move(spec).value();
      auto num = [&](const char* k) -> double {
        auto it = doc.FindMember(k);
        return it != doc.MemberEnd() && it->value.IsNumber() ? it->value.GetDouble() : 0;
      };
      job->seq = static_cast<uint64_t>(num("seq"));
      job->created_at = num("created_at");
      job->progress.rows_done = static_cast<int64_t>(num("rows_done"));
      job->progress.rows_written = static_cast<int64_t>(num("rows_written"));
      job->progress.row_errors = static_cast<int64_t>(num("row_errors"));
      job->progress.elapsed_seconds = num("elapsed_seconds");
      if (auto m = doc.FindMember("message"); m != doc.MemberEnd() && m->value.IsString())
        job->progress.message = m->value.GetString();
      // A job a stop interrupted (or that never started) runs again from its checkpoint.
      job->progress.state = IsFinal(*state) ? *state : JobState::kQueued;
      loaded.push_back(std::move(job));
    }
  }
  std::sort(loaded.begin(), loaded.end(), [](const auto& a, const auto& b) { return a->seq < b->seq; });
  MutexLock l(&mu_);
  if (started_) return Status::OK();
  started_ = true;
  for (auto& job : loaded) {
    sequence_ = std::max(sequence_, job->seq);
    if (job->progress.state == JobState::kQueued) queue_.push_back(job);
    jobs_.emplace(job->id, job);
  }
  for (int i = 0; i < std::max(1, options_.max_running); ++i) workers_.emplace_back([this] { Work(); });
  return Status::OK();
}

void JobManager::Shutdown() {
  {
    MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, job] : jobs_)
      if (job->runner) job->runner->Interrupt();
    cv_.NotifyAll();
  }
  for (auto& t : workers_) t.join();
  workers_.clear();
}

Result<std::string> JobManager::Submit(std::string_view spec_json) {
  INFERD_ASSIGN_OR_RETURN(JobSpec spec, ParseJobSpec(spec_json));
  INFERD_RETURN_IF_ERROR(stores_.Check(spec));
  {
    // Validation reads the source's columns, its first row and the model's
    // config; a runner made for it is dropped (the job's own opens its
    // source when it starts, so a queued job holds no file or database open).
    JobRunner probe("validation", spec, &stores_, submitter_, clock_);
    INFERD_RETURN_IF_ERROR(probe.ValidateWithFirstRow());
  }
  auto job = std::make_shared<Job>();
  job->spec = std::move(spec);
  job->created_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  MutexLock l(&mu_);
  if (stopping_) return Status::Unavailable("the server is shutting down");
  job->seq = ++sequence_;
  job->id = NewId(job->seq);
  job->progress.state = JobState::kQueued;
  jobs_.emplace(job->id, job);
  queue_.push_back(job);
  const RecordWrite record = Snapshot(*job);
  cv_.NotifyAll();
  l.Unlock();
  Write(record);
  return record.json;
}

Result<std::string> JobManager::Get(const std::string& id) const {
  MutexLock l(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Status::NotFound("unknown job '" + id + "'");
  return ToJson(*it->second);
}

std::string JobManager::List() const {
  MutexLock l(&mu_);
  std::vector<const Job*> all;
  for (const auto& [id, job] : jobs_) all.push_back(job.get());
  std::sort(all.begin(), all.end(), [](const Job* a, const Job* b) { return a->seq > b->seq; });
  std::string out = "{\"jobs\":[";
  for (size_t i = 0; i < all.size(); ++i) {
    if (i) out += ',';
    out += ToJson(*all[i]);
  }
  out += "]}";
  return out;
}

Result<std::string> JobManager::Cancel(const std::string& id) {
  MutexLock l(&mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return Status::NotFound("unknown job '" + id + "'");
  Job& job = *it->second;
  if (job.runner) {
    job.runner->Cancel();
  } else if (job.progress.state == JobState::kQueued) {
    job.progress.state = JobState::kCancelled;
    job.progress.message = "cancelled before it started";
    std::erase_if(queue_, [&](const auto& q) { return q.get() == &job; });
    const RecordWrite record = Snapshot(job);
    l.Unlock();
    Write(record);
    return record.json;
  }
  return ToJson(job);
}

std::map<JobState, int> JobManager::CountByState() const {
  MutexLock l(&mu_);
  std::map<JobState, int> out;
  for (const auto& [id, job] : jobs_) ++out[job->runner ? job->runner->Progress().state : job->progress.state];
  return out;
}

void JobManager::Work() {
  for (;;) {
    std::shared_ptr<Job> job;
    JobRunner* runner = nullptr;
    RecordWrite running;
    {
      MutexLock l(&mu_);
      while (!stopping_ && queue_.empty()) cv_.Wait(&mu_);
      if (stopping_) return;
      job = queue_.front();
      queue_.pop_front();
      job->runner = std::make_unique<JobRunner>(job->id, job->spec, &stores_, submitter_, clock_);
      runner = job->runner.get();
      job->progress.state = JobState::kRunning;
      running = Snapshot(*job);
    }
    Write(running);
    (void)runner->Run();  // the outcome is in its progress
    std::vector<RecordWrite> records;
    {
      MutexLock l(&mu_);
      job->progress = runner->Progress();
      job->runner.reset();                // closes its source and sink
      records.push_back(Snapshot(*job));  // before the trim: a removal of this job must come after it
      for (auto& r : TrimFinished()) records.push_back(std::move(r));
    }
    for (const auto& r : records) Write(r);
  }
}

std::vector<JobManager::RecordWrite> JobManager::TrimFinished() {
  std::vector<RecordWrite> removed;
  size_t finished = 0;
  for (const auto& [id, job] : jobs_) finished += IsFinal(job->progress.state) && !job->runner;
  while (finished > options_.max_finished) {
    auto oldest = jobs_.end();
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it)
      if (IsFinal(it->second->progress.state) && !it->second->runner &&
          (oldest == jobs_.end() || it->second->seq < oldest->second->seq))
        oldest = it;
    if (oldest == jobs_.end()) break;
    removed.push_back(RecordWrite{oldest->first, "", ++oldest->second->record_version});
    jobs_.erase(oldest);
    --finished;
  }
  return removed;
}

std::string JobManager::ToJson(const Job& job) const {
  const JobProgress p = job.runner ? job.runner->Progress() : job.progress;
  rapidjson::StringBuffer buf;
  Writer w(buf);
  w.StartObject();
  w.Key("id");
  Str(w, job.id);
  w.Key("model");
  Str(w, job.spec.model);
  w.Key("state");
  Str(w, JobStateName(p.state));
  w.Key("message");
  Str(w, p.message);
  w.Key("seq");
  w.Uint64(job.seq);
  w.Key("created_at");
  w.Double(job.created_at);
  w.Key("rows_done");
  w.Int64(p.rows_done);
  w.Key("rows_written");
  w.Int64(p.rows_written);
  w.Key("row_errors");
  w.Int64(p.row_errors);
  w.Key("rows_resumed");
  w.Int64(p.rows_resumed);
  w.Key("rows_total");
  p.rows_total ? w.Int64(*p.rows_total) : w.Null();
  w.Key("progress");
  p.fraction ? w.Double(*p.fraction) : w.Null();
  w.Key("rows_per_second");
  w.Double(p.rows_per_second);
  w.Key("eta_seconds");
  p.eta_seconds ? w.Double(*p.eta_seconds) : w.Null();
  w.Key("elapsed_seconds");
  w.Double(p.elapsed_seconds);
  w.Key("model_versions");
  w.StartArray();
  for (const auto& v : p.model_versions) Str(w, v);
  w.EndArray();
  w.Key("recent_errors");
  w.StartArray();
  for (const auto& e : p.recent_errors) {
    w.StartObject();
    w.Key("row");
    w.Int64(e.ordinal);
    w.Key("key");
    Str(w, e.key);
    w.Key("message");
    Str(w, e.message);
    w.EndObject();
  }
  w.EndArray();
  w.Key("spec");
  const std::string spec = jobs::ToJson(job.spec);
  w.RawValue(spec.data(), spec.size(), rapidjson::kObjectType);
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

JobManager::RecordWrite JobManager::Snapshot(Job& job) const {
  return RecordWrite{job.id, ToJson(job), ++job.record_version};
}

void JobManager::Write(const RecordWrite& record) {
  if (options_.state_dir.empty()) return;
  MutexLock l(&files_mu_);
  uint64_t& on_disk = written_[record.id];
  if (record.version <= on_disk) return;  // a newer snapshot is already there
  on_disk = record.version;
  const std::string path = options_.state_dir + "/" + record.id + ".json";
  std::error_code ec;
  if (record.json.empty()) {  // the job was forgotten
    std::filesystem::remove(path, ec);
    return;
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << record.json;
    if (!out) return;
  }
  std::filesystem::rename(tmp, path, ec);
}

}  // namespace inferd::jobs
