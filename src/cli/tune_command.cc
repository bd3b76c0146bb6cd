// `inferd tune`: the serving settings of one model that give the most
// throughput within a p99 objective on this machine, with a cost report. See
// docs/tune.md.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "backends/backend.h"
#include "cli/commands.h"
#include "tune/tune_report.h"
#include "tune/tuner.h"

namespace inferd::cli {
namespace {

namespace fs = std::filesystem;

struct TuneFlags {
  tune::TuneOptions o;
  std::string protocols = "v2-json,v2-binary,grpc";
  bool no_int8 = false;
  std::string search;
  double core_hour_usd = 0.05;
  std::string output_dir;
  std::string write_config;
  bool force = false;
  bool keep_work_dir = false;
};

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

bool WriteFile(const fs::path& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f << data;
  return static_cast<bool>(f);
}

int Tune(TuneFlags f) {
  tune::TuneOptions& o = f.o;
  o.protocols = SplitCommas(f.protocols);
  for (const auto& p : o.protocols) {
    if (p != "v2-json" && p != "v2-binary" && p != "v1" && p != "grpc") {
      std::cerr << "--protocols: '" << p << "' is not v2-json, v2-binary, v1 or grpc\n";
      return 2;
    }
  }
  if (o.protocols.empty()) {
    std::cerr << "--protocols: name at least one\n";
    return 2;
  }
  o.try_int8 = !f.no_int8;
  for (const auto& d : SplitCommas(f.search)) {
    if (std::find(tune::kDimensionNames.begin(), tune::kDimensionNames.end(), d) == tune::kDimensionNames.end()) {
      std::cerr << "--search: '" << d << "' is not protocol, instances, threads, batching, max_batch_size or int8\n";
      return 2;
    }
    o.search.insert(d);
  }
  if (f.output_dir.empty()) f.output_dir = "tune-" + o.model;
  if (f.write_config.empty()) f.write_config = (fs::path(f.output_dir) / "config.pbtxt").string();
  // Refused before minutes of measuring, and again before writing.
  if (fs::exists(f.write_config) && !f.force) {
    std::cerr << f.write_config << " exists: pass --force to overwrite it (or --write-config elsewhere)\n";
    return 2;
  }
  std::error_code ec;
  fs::create_directories(f.output_dir, ec);
  if (ec) {
    std::cerr << "cannot create " << f.output_dir << ": " << ec.message() << "\n";
    return 2;
  }
  char exe[4096] = {0};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    std::cerr << "cannot find the inferd executable (/proc/self/exe)\n";
    return 1;
  }
  o.binary = std::string(exe, static_cast<size_t>(n));
  bool made_work_dir = false;
  if (o.work_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/inferd-tune-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::cerr << "cannot create a work directory under " << (tmp && *tmp ? tmp : "/tmp") << "\n";
      return 1;
    }
    o.work_dir = tmpl;
    made_work_dir = true;
  }
  o.progress = [](const std::string& line) { std::cerr << line << std::endl; };
  BackendRegistry backends;
  if (Status st = RegisterBuiltinBackends(&backends); !st.ok()) {
    std::cerr << st.message() << "\n";
    return 1;
  }
  auto r = tune::RunTune(o, backends);
  if (made_work_dir && !f.keep_work_dir) fs::remove_all(o.work_dir, ec);
  if (!r.ok()) {
    std::cerr << "tune failed: " << r.status().message() << "\n";
    return r.status().code() == StatusCode::kInvalidArgument || r.status().code() == StatusCode::kNotFound ? 2 : 1;
  }
  const fs::path dir(f.output_dir);
  const std::string plot = "throughput_vs_p99.png";
  auto config = tune::ChosenConfig(*r);
  std::string written;
  if (config.ok()) {
    if (fs::exists(f.write_config) && !f.force) {
      std::cerr << f.write_config << " appeared while tuning: not overwritten (pass --force)\n";
    } else if (!WriteFile(f.write_config, *config)) {
      std::cerr << "cannot write " << f.write_config << "\n";
      return 1;
    } else {
      written = f.write_config;
    }
  }
  if (!WriteFile(dir / "report.md", tune::RenderTuneMarkdown(*r, f.core_hour_usd, plot, written)) ||
      !WriteFile(dir / "report.json", tune::RenderTuneJson(*r, f.core_hour_usd) + "\n") ||
      !WriteFile(dir / plot, tune::RenderTunePlot(*r))) {
    std::cerr << "cannot write the report into " << f.output_dir << "\n";
    return 1;
  }
  std::cout << tune::Verdict(*r) << "\n";
  if (!written.empty()) std::cout << "config: " << written << "\n";
  std::cout << "report: " << (dir / "report.md").string() << ", " << (dir / "report.json").string() << ", "
            << (dir / plot).string() << "\n";
  return config.ok() ? 0 : 1;
}

}  // namespace

void AddTuneCommand(CLI::App& app, std::function<int()>* run) {
  auto f = std::make_shared<TuneFlags>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Find the serving settings of one model (instances, threads, batching, int8, protocol) with the most "
      "throughput within a p99 objective on this machine; write its config.pbtxt and a cost report (docs/tune.md)");
  tune::TuneOptions& o = f->o;
  cmd->add_option("-m,--model", o.model, "The model (a folder of the repository)")->required();
  cmd->add_option("--model-repository", o.repository, "Triton-layout model repository (read only)")->required();
  cmd->add_option("--p99-ms", o.p99_ms, "The latency objective: p99 in milliseconds")
      ->required()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--core-hour-usd", f->core_hour_usd, "Price of one core for one hour, for the cost report")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--output-dir", f->output_dir,
                  "Where report.md, report.json and throughput_vs_p99.png go "
                  "(default: tune-MODEL)");
  cmd->add_option("--write-config", f->write_config,
                  "Where the chosen config.pbtxt goes (default: OUTPUT_DIR/config.pbtxt); an existing file is "
                  "never overwritten without --force");
  cmd->add_flag("--force", f->force, "Overwrite the --write-config file");
  cmd->add_option("--time-budget-s", o.time_budget_s, "Stop searching before this many seconds")
      ->capture_default_str()
      ->check(CLI::Range(10.0, 86400.0));
  cmd->add_option("--max-candidates", o.max_evaluations, "Measure at most this many settings")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--min-gain", o.min_gain, "A move must beat the current settings by this fraction")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--protocols", f->protocols, "Client protocols to try (v2-json, v2-binary, v1, grpc)")
      ->capture_default_str();
  cmd->add_option("--protocol", o.start_protocol, "The protocol clients use today (the start point)")
      ->capture_default_str()
      ->check(CLI::IsMember({"v2-json", "v2-binary", "v1", "grpc"}));
  cmd->add_option("--search", f->search,
                  "Only these settings (comma-separated: protocol, instances, threads, batching, max_batch_size, "
                  "int8); the others stay the model's own. Default: all");
  cmd->add_flag("--no-int8", f->no_int8, "Do not try int8 (models whose backend quantizes at load)");
  cmd->add_option("--batch-size", o.batch_size, "Rows per request")->capture_default_str()->check(CLI::Range(1, 65536));
  cmd->add_option("--input-data", o.input_data, "Request inputs (inferd bench's --input-data JSON); default random");
  cmd->add_option("--max-concurrency", o.max_concurrency, "Highest closed-loop concurrency of a sweep")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--warmup-s", o.warmup_s, "Warm-up before each measurement")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 60.0));
  cmd->add_option("--window-s", o.window_s, "Measurement window (two to four per level)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 60.0));
  cmd->add_option("--cores", o.cores, "Cores to tune for (default: this machine's)")->check(CLI::Range(1, 1024));
  cmd->add_option("--serve-arg", o.serve_args,
                  "A flag for the candidates' `inferd serve` (repeat; e.g. "
                  "--serve-arg=--http-threads=2)");
  cmd->add_option("--load-timeout-s", o.load_timeout_s, "How long a candidate may take to load")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3600.0));
  cmd->add_option("--work-dir", o.work_dir,
                  "The candidates' repositories and logs (default: a temporary folder, "
                  "removed afterwards)");
  cmd->add_flag("--keep-work-dir", f->keep_work_dir, "Keep the temporary work folder (the servers' logs)");
  cmd->add_option("--seed", o.seed, "Random inputs' seed")->capture_default_str();
  cmd->callback([f, run] { *run = [f] { return Tune(*f); }; });
}

}  // namespace inferd::cli
