#include "tune/tuner.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <thread>

#include "bench/grpc/grpc_bench_client.h"
#include "bench/grpc/h2_closed_loop.h"
#include "bench/http_client.h"
#include "bench/request_builder.h"
#include "repository/config_edit.h"
#include "repository/repository.h"
#include "tune/server_process.h"

namespace inferd::tune {

namespace fs = std::filesystem;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string MinSec(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d:%02d", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return buf;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A window long enough for about 100 answers at the last level's rate (a p99
// of fewer is the maximum), between `window_s` and three times it.
double WindowFor(double last_requests_per_s, double window_s) {
  if (last_requests_per_s <= 0) return window_s;
  return std::clamp(100.0 / last_requests_per_s, window_s, 3 * window_s);
}

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// "" when the server serves the model as int8, else why not (its statistics'
// quantization object).
std::string Int8Refusal(bench::HttpClient& client, const std::string& model) {
  auto r = client.Request("GET", "/v2/models/" + model + "/stats", "");
  if (!r.ok() || r->status != 200) return "no statistics";
  rapidjson::Document d;
  d.Parse(r->body.data(), r->body.size());
  if (d.HasParseError() || !d.IsObject() || !d.HasMember("model_stats") || !d["model_stats"].IsArray() ||
      d["model_stats"].Empty())
    return "no statistics";
  const auto& m = d["model_stats"][0];
  if (!m.HasMember("quantization") || !m["quantization"].IsObject()) return "the server reports no quantization";
  const auto& q = m["quantization"];
  const std::string serving = q.HasMember("serving") && q["serving"].IsString() ? q["serving"].GetString() : "";
  if (serving == "int8") return "";
  const std::string reason = q.HasMember("reason") && q["reason"].IsString() ? q["reason"].GetString() : "";
  return "the server serves " + (serving.empty() ? std::string("FP32") : serving) +
         (reason.empty() ? "" : ": " + reason);
}

class Run {
 public:
  Run(const TuneOptions& o, TuneResult* result, TuneSpace* space, std::string model_dir)
      : o_(o), r_(result), space_(space), model_dir_(std::move(model_dir)), t0_(std::chrono::steady_clock::now()) {}
  ~Run() {
    if (server_) server_->Stop();
  }

  double Elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

  // Whether one more candidate would overrun the budget (judged by the mean so far).
  bool OutOfTime() const {
    const double mean = r_->trials.empty() ? 0 : Elapsed() / static_cast<double>(r_->trials.size());
    return Elapsed() + mean > o_.time_budget_s;
  }

  Score Evaluate(const Point& p) {
    const Candidate c = space_->At(p);
    if (auto it = by_key_.find(c.Key()); it != by_key_.end()) return it->second;
    Trial t;
    t.candidate = c;
    t.start_s = Elapsed();
    const bool is_default = p == space_->start();
    Say("[" + std::to_string(r_->trials.size() + 1) + "] " + MinSec(t.start_s) + " " + c.Key() +
        (is_default ? " (the model's own config)" : ""));
    Score s = Measure(c, is_default, &t);
    t.score = s;
    by_key_[c.Key()] = s;
    r_->trials.push_back(std::move(t));
    return s;
  }

 private:
  void Say(const std::string& line) const {
    if (o_.progress) o_.progress(line);
  }

  Score Measure(const Candidate& c, bool is_default, Trial* t) {
    if (Status st = EnsureServer(c, is_default, t); !st.ok()) {
      t->note = "did not serve: " + FirstLine(st.message());
      Say("    " + t->note);
      server_.reset();
      server_key_.clear();
      return {false, 0, kInf};
    }
    bench::HttpClient client("127.0.0.1", server_->http_port());
    if (c.int8) {
      if (std::string why = Int8Refusal(client, o_.model); !why.empty()) {
        space_->DisallowInt8();
        if (is_default) {  // the model's own config is measured as it serves
          t->note = "int8 asked for, not served (" + why + ")";
          Say("    " + t->note);
        } else {
          t->note = "int8 not served (" + why + "); int8 is not tried again";
          Say("    " + t->note);
          return {false, 0, kInf};
        }
      }
    }
    auto load = LoadFor(c.protocol);
    if (!load.ok()) {
      t->note = "no load: " + FirstLine(load.status().message());
      Say("    " + t->note);
      return {false, 0, kInf};
    }
    SweepRule rule{o_.p99_ms, o_.max_concurrency, o_.min_gain};
    ServerProcess* server = server_.get();
    for (int conc = NextConcurrency(t->sweep, rule); conc > 0; conc = NextConcurrency(t->sweep, rule)) {
      load->window_s = WindowFor(t->sweep.empty() ? 0 : t->sweep.back().summary.throughput, o_.window_s);
      SweepPoint pt = MeasureAt(*load, conc, [server] { return server->CpuSeconds(); });
      Say("    concurrency " + std::to_string(conc) + ": " + Fixed(pt.summary.throughput * o_.batch_size, 0) +
          " predictions/s, p99 " + Fixed(pt.summary.p99_us / 1e3, 2) + " ms" +
          (pt.summary.errors ? ", " + std::to_string(pt.summary.errors) + " errors (" + pt.first_error + ")" : ""));
      t->sweep.push_back(std::move(pt));
    }
    t->operating = OperatingPoint(t->sweep, o_.p99_ms);
    if (t->operating < 0) {
      double lowest = kInf;
      for (const auto& pt : t->sweep)
        if (pt.summary.requests > 0) lowest = std::min(lowest, pt.summary.p99_us / 1e3);
      Say("    the objective was not met (lowest p99 " + Fixed(lowest, 2) + " ms)");
      return {false, 0, lowest};
    }
    const SweepPoint& op = t->sweep[static_cast<size_t>(t->operating)];
    const double thr = op.summary.throughput * o_.batch_size;
    Say("    -> " + Fixed(thr, 0) + " predictions/s within the objective (concurrency " +
        std::to_string(op.concurrency) + ", p99 " + Fixed(op.summary.p99_us / 1e3, 2) + " ms)");
    return {true, thr, op.summary.p99_us / 1e3};
  }

  // The candidate's server: the running one when only the protocol changed.
  Status EnsureServer(const Candidate& c, bool is_default, Trial* t) {
    if (server_ && server_key_ == c.ServerKey()) return Status::OK();
    if (server_) server_->Stop();
    server_.reset();
    server_key_.clear();
    const fs::path repo = fs::path(o_.work_dir) / ("candidate-" + std::to_string(++servers_));
    const fs::path dir = repo / o_.model;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return Status::Internal("cannot create " + dir.string() + ": " + ec.message());
    for (const auto& entry : fs::directory_iterator(model_dir_, ec)) {
      if (entry.path().filename() == "config.pbtxt") continue;
      fs::create_symlink(fs::absolute(entry.path()), dir / entry.path().filename(), ec);
      if (ec) return Status::Internal("cannot link " + entry.path().string() + ": " + ec.message());
    }
    std::string text = r_->original_config;
    if (!is_default) {
      INFERD_ASSIGN_OR_RETURN(text, EditModelConfig(r_->original_config, o_.model, EditFor(c, r_->facts)));
    }
    std::ofstream(dir / "config.pbtxt") << text;
    ServerProcessOptions so;
    so.binary = o_.binary;
    so.repository = repo.string();
    so.model = o_.model;
    so.log_path = (repo / "server.log").string();
    so.extra_args = o_.serve_args;
    so.start_timeout_s = o_.load_timeout_s;
    const double start = Elapsed();
    INFERD_ASSIGN_OR_RETURN(server_, ServerProcess::Start(so));
    t->server_start_s = Elapsed() - start;
    server_key_ = c.ServerKey();
    return Status::OK();
  }

  // The requests (made once, from the first server's metadata) and senders for `protocol`.
  Result<bench::LoadOptions> LoadFor(const std::string& protocol) {
    if (inputs_.empty()) {
      bench::HttpClient client("127.0.0.1", server_->http_port());
      INFERD_ASSIGN_OR_RETURN(auto meta, client.Request("GET", "/v2/models/" + o_.model, ""));
      if (meta.status != 200) return Status::NotFound("model metadata: HTTP " + std::to_string(meta.status));
      INFERD_ASSIGN_OR_RETURN(desc_, bench::ParseModelMetadata(meta.body));
      desc_.name = o_.model;
      if (!o_.input_data.empty()) {
        INFERD_ASSIGN_OR_RETURN(inputs_, bench::InputsFromFile(o_.input_data, desc_));
      } else {
        for (int i = 0; i < 4; ++i)
          inputs_.push_back(bench::RandomInputs(desc_, o_.batch_size, o_.seed + static_cast<uint64_t>(i), {}));
      }
      if (inputs_.empty()) return Status::InvalidArgument("no inputs");
    }
    bench::LoadOptions lo;
    const bool grpc = protocol == "grpc";
    const std::string grpc_url = "127.0.0.1:" + std::to_string(server_->grpc_port());
    if (grpc) {
      if (server_->grpc_port() == 0) return Status::FailedPrecondition("the server has no gRPC port");
      lo.make_sender = bench::GrpcSenderFactory(grpc_url);
      lo.closed_loop_driver = bench::H2GrpcClosedLoopDriver(grpc_url, 4);
      for (const auto& set : inputs_) lo.requests.push_back(bench::EncodeBenchRequest(o_.model, "", set));
    } else {
      INFERD_ASSIGN_OR_RETURN(bench::Protocol p, bench::ParseProtocol(protocol));
      lo.make_sender = bench::HttpSenderFactory("127.0.0.1", server_->http_port());
      for (const auto& set : inputs_) {
        INFERD_ASSIGN_OR_RETURN(auto req, bench::EncodeRequest(p, desc_, "", set, {}));
        lo.requests.push_back(std::move(req));
      }
    }
    lo.warmup_s = o_.warmup_s;
    lo.window_s = o_.window_s;
    lo.stable_windows = 2;
    lo.max_windows = std::max(2, o_.max_windows);
    lo.seed = o_.seed;
    return lo;
  }

  const TuneOptions& o_;
  TuneResult* r_;
  TuneSpace* space_;
  std::string model_dir_;
  std::chrono::steady_clock::time_point t0_;
  std::unique_ptr<ServerProcess> server_;
  std::string server_key_;
  int servers_ = 0;
  std::map<std::string, Score> by_key_;
  bench::ModelDesc desc_;
  std::vector<std::vector<Tensor>> inputs_;
};

}  // namespace

Result<TuneResult> RunTune(const TuneOptions& o, const BackendRegistry& backends) {
  if (!(o.p99_ms > 0)) return Status::InvalidArgument("the p99 objective must be above 0 ms");
  if (o.batch_size < 1) return Status::InvalidArgument("the batch size must be at least 1");
  ModelRepository repo(o.repository);
  INFERD_ASSIGN_OR_RETURN(ModelSource src, repo.ReadModel(o.model));
  if (src.available_versions.empty()) return Status::NotFound("model '" + o.model + "' has no version folder");
  ModelSpec spec = src.spec;
  INFERD_ASSIGN_OR_RETURN(Backend * backend, backends.ResolveSpec(&spec, repo.NewestVersionFiles(src)));
  if (spec.ensemble)
    return Status::InvalidArgument("'" + o.model + "' is an ensemble: tune its steps (the ensemble itself runs none)");
  if (backend->scheduler_kind() == "generative" || spec.scheduler_kind == "generative")
    return Status::InvalidArgument("'" + o.model +
                                   "' is a generative model: its engine batches by itself; measure it with "
                                   "`inferd bench --generative`");
  if (spec.decoupled)
    return Status::InvalidArgument("'" + o.model + "' is decoupled: inferd tune measures unary calls");

  TuneResult r;
  r.machine = bench::ReadMachineInfo();
  r.cores = o.cores > 0 ? o.cores : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  r.p99_ms = o.p99_ms;
  r.batch_size = o.batch_size;
  r.original_config = src.config_text;
  if (spec.max_batch_size == 0 && o.batch_size > 1)
    return Status::InvalidArgument("'" + o.model + "' does not batch (max_batch_size 0): --batch-size must be 1");
  if (spec.max_batch_size > 0 && o.batch_size > spec.max_batch_size)
    return Status::InvalidArgument("--batch-size above the model's max_batch_size " +
                                   std::to_string(spec.max_batch_size));
  r.facts = FactsFromSpec(spec, std::string(backend->name()), o.try_int8 && backend->guards_quantization(), r.cores - 1,
                          o.start_protocol);
  TuneSpace space(r.facts, r.cores, o.protocols, o.search);
  r.dims = space.dims();
  if (o.progress) {
    std::string dims;
    for (const auto& d : r.dims)
      dims += (dims.empty() ? "" : ", ") + d.name + " (" + std::to_string(d.values.size()) + ")";
    o.progress("tune " + o.model + " (" + r.facts.backend + "), " + std::to_string(r.cores) + " cores, p99 <= " +
               Fixed(o.p99_ms, 2) + " ms, budget " + Fixed(o.time_budget_s, 0) + " s; searching " + dims);
  }
  Run run(o, &r, &space, src.dir);
  SearchOptions so;
  so.min_gain = o.min_gain;
  so.max_evaluations = o.max_evaluations;
  so.out_of_time = [&run] { return run.OutOfTime(); };
  so.allowed = [&space](const Point& p) { return space.Allowed(p); };
  SearchResult sr = HillClimb(
      r.dims, space.start(), [&run](const Point& p) { return run.Evaluate(p); }, so);
  r.stop_reason = sr.stop_reason;
  r.elapsed_s = run.Elapsed();
  const std::string best_key = space.At(sr.best).Key();
  for (size_t i = 0; i < r.trials.size(); ++i)
    if (r.trials[i].candidate.Key() == best_key && r.trials[i].score.feasible) r.best = static_cast<int>(i);
  return r;
}

}  // namespace inferd::tune
