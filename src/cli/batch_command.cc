// `inferd batch`: runs a batch prediction job (jobs/) in-process against a
// model repository: the job's rows go through the same schedulers a server
// uses; progress on stderr; resumable (run the same command again).
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "backends/backend.h"
#include "cli/commands.h"
#include "jobs/job_runner.h"
#include "jobs/job_stores.h"
#include "server/inference_server.h"
#include "server/server_options.h"

namespace inferd::cli {
namespace {

struct BatchFlags {
  std::string repository;
  std::string job_file;
  std::string job_id;
  std::string jobs_config;
  std::string progress = "auto";
  int intra_op_threads = 0;
  bool verbose = false;
};

// SIGINT/SIGTERM: the job stops at its next commit and can resume.
std::atomic<int> g_stop_signal{0};
void OnSignal(int sig) { g_stop_signal.store(sig); }

std::string Thousands(int64_t v) {
  const std::string digits = std::to_string(v < 0 ? -v : v);
  std::string s = v < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {  // built forward: no inserts (GCC 12 warns falsely on them)
    if (i > 0 && (digits.size() - i) % 3 == 0) s.push_back(',');
    s.push_back(digits[i]);
  }
  return s;
}

std::string Duration(double secs) {
  char buf[32];
  if (secs < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", secs);
  else if (secs < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(secs) / 60, static_cast<int>(secs) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(secs) / 3600, (static_cast<int>(secs) / 60) % 60);
  return buf;
}

// [##########..........]  52%  52,000/100,000 rows  18,311 rows/s  ETA 3s  errors 0
std::string ProgressLine(const jobs::JobProgress& p) {
  std::string line;
  if (p.fraction) {
    const int width = 24;
    const int filled = static_cast<int>(std::lround(*p.fraction * width));
    line += '[';
    line.append(static_cast<size_t>(filled), '#');
    line.append(static_cast<size_t>(width - filled), '.');
    line += "] ";
    char pct[8];
    std::snprintf(pct, sizeof pct, "%3.0f%%", *p.fraction * 100);
    line += pct;
  }
  line += "  ";
  line += Thousands(p.rows_done);
  if (p.rows_total) {
    line += '/';
    line += Thousands(*p.rows_total);
  }
  line += " rows  ";
  line += Thousands(static_cast<int64_t>(p.rows_per_second));
  line += " rows/s";
  if (p.eta_seconds) {
    line += "  ETA ";
    line += Duration(*p.eta_seconds);
  }
  line += "  errors ";
  line += Thousands(p.row_errors);
  return line;
}

std::string DefaultJobId(const std::string& spec_json) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : spec_json) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "batch-%012llx", static_cast<unsigned long long>(h & 0xffffffffffffull));
  return buf;
}

int RunBatch(const BatchFlags& f) {
  // SIGINT/SIGTERM from the start: one that comes while the model loads
  // stops the job before its first row (exit 3) instead of killing the process.
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // The server's start-up lines (every model of the repository) would bury the progress.
  spdlog::set_level(f.verbose ? spdlog::level::info : spdlog::level::warn);
  std::string text;
  if (f.job_file == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    text = ss.str();
  } else {
    std::ifstream in(f.job_file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "inferd batch: cannot read job spec '%s'\n", f.job_file.c_str());
      return 2;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto spec = jobs::ParseJobSpec(text);
  if (!spec.ok()) {
    std::fprintf(stderr, "inferd batch: %s\n", spec.status().message().c_str());
    return 2;
  }
  jobs::JobsConfig config;
  if (!f.jobs_config.empty()) {
    auto loaded = jobs::LoadJobsConfig(f.jobs_config);
    if (!loaded.ok()) {
      std::fprintf(stderr, "inferd batch: %s\n", loaded.status().message().c_str());
      return 2;
    }
    config = std::move(loaded).value();
  }
  config.unrestricted = true;  // the user's own machine and rights
  const jobs::JobStores stores(std::move(config));

  BackendRegistry backends;
  if (Status st = RegisterBuiltinBackends(&backends); !st.ok()) {
    std::fprintf(stderr, "inferd batch: cannot register backends: %s\n", st.message().c_str());
    return 1;
  }
  SteadyClock clock;
  ServerOptions so;
  so.model_repository = f.repository;
  so.control_mode = ModelControlMode::kExplicit;  // only the job's model (and its steps) load
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  so.default_intra_op_threads = f.intra_op_threads > 0 ? f.intra_op_threads : std::max(1, cores - 1);
  InferenceServer server(so, &backends, &clock);
  if (Status st = server.Start(); !st.ok()) {
    std::fprintf(stderr, "inferd batch: %s\n", st.message().c_str());
    return 1;
  }
  const std::string id = f.job_id.empty() ? DefaultJobId(jobs::ToJson(*spec)) : f.job_id;
  jobs::JobRunner runner(id, *spec, &stores, &server, &clock);
  if (Status st = runner.Validate(); !st.ok()) {
    std::fprintf(stderr, "inferd batch: %s\n", st.message().c_str());
    server.Shutdown();
    return 2;
  }

  Status result;
  std::atomic<bool> done{false};
  std::thread worker([&] {
    result = runner.Run();
    done.store(true);
  });
  const bool tty = isatty(STDERR_FILENO) != 0;
  const std::string mode = f.progress == "auto" ? (tty ? "bar" : "lines") : f.progress;
  auto last_line = clock.Now();
  bool interrupted = false;
  while (!done.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the progress display's refresh
    if (g_stop_signal.load() != 0 && !interrupted) {
      interrupted = true;
      runner.Interrupt();
      std::fprintf(stderr, "\ninferd batch: stopping at the next commit (run the same command again to resume)\n");
    }
    const auto now = clock.Now();
    if (mode == "bar") {
      std::fprintf(stderr, "\r%s\x1b[K", ProgressLine(runner.Progress()).c_str());
    } else if (mode == "lines" && now - last_line >= std::chrono::seconds(5)) {
      std::fprintf(stderr, "%s\n", ProgressLine(runner.Progress()).c_str());
      last_line = now;
    }
  }
  worker.join();
  const jobs::JobProgress p = runner.Progress();
  if (mode == "bar") std::fprintf(stderr, "\r%s\x1b[K\n", ProgressLine(p).c_str());
  server.Shutdown();

  std::string versions;
  for (const auto& v : p.model_versions) {
    if (!versions.empty()) versions += ", ";
    versions += v;
  }
  std::fprintf(stderr, "job %s: %s in %.1f s\n", id.c_str(), std::string(jobs::JobStateName(p.state)).c_str(),
               p.elapsed_seconds);
  std::fprintf(stderr, "  rows: %s done (%s resumed from the checkpoint), %s written, %s errors\n",
               Thousands(p.rows_done).c_str(), Thousands(p.rows_resumed).c_str(), Thousands(p.rows_written).c_str(),
               Thousands(p.row_errors).c_str());
  std::fprintf(stderr, "  rate: %s rows/s; model %s version %s\n",
               Thousands(static_cast<int64_t>(p.rows_per_second)).c_str(), spec->model.c_str(),
               versions.empty() ? "-" : versions.c_str());
  for (const auto& e : p.recent_errors)
    std::fprintf(stderr, "  row %lld (key '%s'): %s\n", static_cast<long long>(e.ordinal), e.key.c_str(),
                 e.message.c_str());
  if (!result.ok() && p.state == jobs::JobState::kFailed)
    std::fprintf(stderr, "  error: %s\n", result.message().c_str());
  switch (p.state) {
    case jobs::JobState::kSucceeded:
      return 0;
    case jobs::JobState::kInterrupted:
      return 3;
    default:
      return 1;
  }
}

}  // namespace

void AddBatchCommand(CLI::App& app, std::function<int()>* run) {
  auto f = std::make_shared<BatchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "batch",
      "Run a batch prediction job in-process: rows from a CSV / JSON Lines file or an SQL query through a model "
      "into SQLite, PostgreSQL or a file, resumable (docs/batch.md)");
  cmd->add_option("--model-repository", f->repository, "Triton-layout model repository")->required();
  cmd->add_option("--job", f->job_file, "Job spec (JSON; '-' = stdin), as POST /v2/jobs takes")->required();
  cmd->add_option("--job-id", f->job_id,
                  "The job's id (its checkpoint's name); default: derived from the spec, so the same command "
                  "resumes an interrupted run");
  cmd->add_option("--jobs-config", f->jobs_config, "Named connections (JSON, as for `serve --jobs-config`)");
  cmd->add_option("--progress", f->progress, "auto | bar | lines | none")
      ->check(CLI::IsMember({"auto", "bar", "lines", "none"}))
      ->capture_default_str();
  cmd->add_option("--intra-op-threads", f->intra_op_threads,
                  "Intra-op threads per model instance (default: cores - 1)");
  cmd->add_flag("--verbose", f->verbose, "Log the server's info lines (model loads) too");
  cmd->callback([f, run] { *run = [f] { return RunBatch(*f); }; });
}

}  // namespace inferd::cli
