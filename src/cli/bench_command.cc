// `inferd bench`: a perf_analyzer-style load generator, and the in-process
// baseline (`--in-process`). See docs/benchmarks.md.
#include <rapidjson/document.h>

#include <charconv>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>

#include "backends/backend.h"
#include "bench/chain_sender.h"
#include "bench/generative_load.h"
#include "bench/grpc/grpc_bench_client.h"
#include "bench/grpc/h2_closed_loop.h"
#include "bench/http_client.h"
#include "bench/in_process.h"
#include "bench/load_generator.h"
#include "bench/report.h"
#include "bench/request_builder.h"
#include "cli/commands.h"

namespace inferd::cli {
namespace {

struct BenchFlags {
  std::string url = "http://127.0.0.1:8000";
  std::string cacert;  // https:// URLs: the CA file that signed the server's certificate ("" = the system's)
  std::string metadata_url;
  std::string model;
  std::string version;
  std::string protocol = "v2-json";
  std::string grpc_url = "127.0.0.1:8001";
  int grpc_channels = 4;
  std::string concurrency = "1";
  std::string request_rate;
  int batch_size = 1;
  std::string input_data;
  std::string sequence_lengths;              // "LO-HI": mixed-length requests
  int request_count = 64;                    // with --sequence-lengths: distinct requests
  std::string int_range = "-50:50";          // integer inputs' random values
  std::vector<std::string> constant_inputs;  // NAME=VALUE
  double warmup_s = 1.0;
  double window_s = 2.0;
  int max_windows = 10;
  double stability_pct = 10;
  double duration_s = 0;
  int max_connections = 64;
  bool host_stall_probe = false;
  double stall_guard_ms = 200;
  std::string output;
  std::string output_format;  // "" = from the --output file name
  std::string label;
  bool in_process = false;
  std::string repository;
  std::string batch_sizes = "1";
  int threads = 1;
  uint64_t seed = 1;
  std::string then_model;  // --then: post each answer's outputs to this model (back-to-back baseline)
  std::string then_map;
  std::vector<std::string> request_parameters;  // name:value:type
  // --generative: streamed completions from an OpenAI-compatible server (bench/generative_load.h).
  bool generative = false;
  std::string endpoint = "chat";
  int num_prompts = 64;
  int turns = 1;
  std::string prompt_words = "64";   // mean[:spread]
  std::string output_tokens = "64";  // mean[:spread]
  std::string system_prompt;
  double slo_ttft_ms = 0, slo_tpot_ms = 0;
};

// "mean" or "mean:spread".
bool ParseLength(const std::string& s, int* mean, int* spread) {
  const size_t colon = s.find(':');
  try {
    *mean = std::stoi(s.substr(0, colon));
    *spread = colon == std::string::npos ? 0 : std::stoi(s.substr(colon + 1));
  } catch (...) {
    return false;
  }
  return *mean >= 1 && *spread >= 0 && *spread < *mean;
}

int BenchGenerative(const BenchFlags& f) {
  bench::GenerativeLoadOptions o;
  auto url = bench::ParseUrl(f.url);
  if (!url.ok()) {
    std::cerr << url.status().message() << "\n";
    return 2;
  }
  if (bench::IsHttpsUrl(f.url)) {
    std::cerr << "--generative loads speak plain HTTP; https:// URLs work with the tensor loads\n";
    return 2;
  }
  o.host = url->first;
  o.port = url->second;
  o.model = f.model;
  o.chat = f.endpoint == "chat";
  if (f.endpoint != "chat" && f.endpoint != "completions") {
    std::cerr << "--endpoint must be chat or completions\n";
    return 2;
  }
  try {
    o.concurrency = std::stoi(f.concurrency);
    o.request_rate = f.request_rate.empty() ? 0 : std::stod(f.request_rate);
  } catch (...) {
    std::cerr << "--generative takes one --concurrency and one --request-rate value\n";
    return 2;
  }
  o.num_requests = f.num_prompts;
  o.turns = f.turns;
  if (!ParseLength(f.prompt_words, &o.prompt_words, &o.prompt_spread) ||
      !ParseLength(f.output_tokens, &o.output_tokens, &o.output_spread)) {
    std::cerr << "--prompt-words and --output-tokens take mean or mean:spread (spread below the mean)\n";
    return 2;
  }
  o.system_prompt = f.system_prompt;
  o.slo_ttft_ms = f.slo_ttft_ms;
  o.slo_tpot_ms = f.slo_tpot_ms;
  o.seed = f.seed;
  auto r = bench::RunGenerativeLoad(o);
  if (!r.ok()) {
    std::cerr << "bench failed: " << r.status().message() << "\n";
    return 1;
  }
  std::cout << bench::RenderGenerativeReport(*r, f.label);
  if (!f.output.empty()) {
    std::ofstream out(f.output);
    out << bench::GenerativeReportJson(*r, f.label) << "\n";
    if (!out) {
      std::cerr << "cannot write " << f.output << "\n";
      return 1;
    }
  }
  if (r->requests == 0) {
    std::cerr << "bench failed: no request succeeded: " << r->first_error << "\n";
    return 1;
  }
  return r->failures == 0 ? 0 : 1;
}

Result<std::vector<double>> ParseList(const std::string& s) {
  std::vector<double> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    double v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || p != item.data() + item.size() || v <= 0) {
      return Status::InvalidArgument("bad list item '" + item + "' in '" + s + "'");
    }
    out.push_back(v);
  }
  if (out.empty()) return Status::InvalidArgument("empty list");
  return out;
}

// Sums the KServe v2 statistics of all versions of a model.
struct StatsTotals {
  double success = 0, inferences = 0, executions = 0, queue_ns = 0, input_ns = 0, infer_ns = 0, output_ns = 0;
};
std::optional<StatsTotals> FetchStats(bench::HttpClient& client, const std::string& model) {
  auto r = client.Request("GET", "/v2/models/" + model + "/stats", "");
  if (!r.ok() || r->status != 200) return std::nullopt;
  rapidjson::Document doc;
  doc.Parse(r->body.data(), r->body.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("model_stats")) return std::nullopt;
  StatsTotals t;
  for (const auto& m : doc["model_stats"].GetArray()) {
    const auto& is = m["inference_stats"];
    t.success += is["success"]["count"].GetDouble();
    t.queue_ns += is["queue"]["ns"].GetDouble();
    t.input_ns += is["compute_input"]["ns"].GetDouble();
    t.infer_ns += is["compute_infer"]["ns"].GetDouble();
    t.output_ns += is["compute_output"]["ns"].GetDouble();
    t.inferences += m["inference_count"].GetDouble();
    t.executions += m["execution_count"].GetDouble();
  }
  return t;
}

bench::ServerBreakdown Breakdown(const std::optional<StatsTotals>& a, const std::optional<StatsTotals>& b) {
  bench::ServerBreakdown s;
  if (!a || !b || b->success <= a->success) return s;
  const double n = b->success - a->success;
  s.available = true;
  s.queue_us = (b->queue_ns - a->queue_ns) / n / 1e3;
  s.compute_input_us = (b->input_ns - a->input_ns) / n / 1e3;
  s.compute_infer_us = (b->infer_ns - a->infer_ns) / n / 1e3;
  s.compute_output_us = (b->output_ns - a->output_ns) / n / 1e3;
  const double execs = b->executions - a->executions;
  s.avg_batch_rows = execs > 0 ? (b->inferences - a->inferences) / execs : 0;
  return s;
}

// The report format: --output-format when given, else the file name's
// extension (.json or .csv).
Result<std::string> OutputFormat(const std::string& path, const std::string& format) {
  if (!format.empty()) return format;
  auto ends_with = [&](std::string_view ext) {
    return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  };
  if (ends_with(".json")) return std::string("json");
  if (ends_with(".csv")) return std::string("csv");
  return Status::InvalidArgument("cannot tell the report format of '" + path +
                                 "': name it .json or .csv, or give --output-format json|csv");
}

Status WriteOutput(const std::string& path, const std::string& format, const std::vector<bench::ReportRow>& rows) {
  if (path.empty()) return Status::OK();
  INFERD_ASSIGN_OR_RETURN(std::string fmt, OutputFormat(path, format));
  std::ofstream f(path);
  if (!f) return Status::InvalidArgument("cannot write '" + path + "'");
  f << (fmt == "csv" ? bench::RenderCsv(rows) : bench::RenderJson(rows, bench::ReadMachineInfo()));
  return f ? Status::OK() : Status::Internal("write to '" + path + "' failed");
}

// --int-range and --constant-input.
Result<bench::RandomOptions> RandomOptionsFromFlags(const BenchFlags& f) {
  bench::RandomOptions o;
  const size_t colon = f.int_range.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument("");
    o.int_lo = std::stod(f.int_range.substr(0, colon));
    o.int_hi = std::stod(f.int_range.substr(colon + 1));
  } catch (const std::exception&) {
    return Status::InvalidArgument("--int-range '" + f.int_range + "' is not LO:HI");
  }
  if (!(o.int_lo < o.int_hi)) return Status::InvalidArgument("--int-range needs LO < HI");
  for (const std::string& c : f.constant_inputs) {
    const size_t eq = c.find('=');
    try {
      if (eq == std::string::npos || eq == 0) throw std::invalid_argument("");
      o.constants[c.substr(0, eq)] = std::stod(c.substr(eq + 1));
    } catch (const std::exception&) {
      return Status::InvalidArgument("--constant-input '" + c + "' is not NAME=VALUE");
    }
  }
  return o;
}

Result<std::vector<bench::ReportRow>> RunRemote(const BenchFlags& f) {
  INFERD_ASSIGN_OR_RETURN(auto target, bench::ParseUrl(f.url));
  INFERD_ASSIGN_OR_RETURN(auto meta_target, bench::ParseUrl(f.metadata_url.empty() ? f.url : f.metadata_url));
  const bool grpc = f.protocol == "grpc";
  INFERD_ASSIGN_OR_RETURN(bench::Protocol protocol, bench::ParseProtocol(grpc ? "v2-binary" : f.protocol));
  std::shared_ptr<bench::TlsClientContext> tls;
  if (bench::IsHttpsUrl(f.url) || bench::IsHttpsUrl(f.metadata_url)) {
    INFERD_ASSIGN_OR_RETURN(tls, bench::MakeTlsClientContext(f.cacert));
    if (!f.request_rate.empty() || !f.then_model.empty()) {
      return Status::InvalidArgument(
          "https:// URLs work with closed-loop HTTP loads (--concurrency), not "
          "--request-rate or --then");
    }
  }
  bench::HttpClient meta_client(meta_target.first, meta_target.second,
                                bench::IsHttpsUrl(f.metadata_url.empty() ? f.url : f.metadata_url) ? tls : nullptr);
  const std::string meta_path = "/v2/models/" + f.model + (f.version.empty() ? "" : "/versions/" + f.version);
  INFERD_ASSIGN_OR_RETURN(auto meta, meta_client.Request("GET", meta_path, ""));
  if (meta.status != 200)
    return Status::NotFound("model metadata: HTTP " + std::to_string(meta.status) + " " + meta.body);
  INFERD_ASSIGN_OR_RETURN(bench::ModelDesc model, bench::ParseModelMetadata(meta.body));
  model.name = f.model;

  std::vector<std::vector<Tensor>> input_sets;
  if (!f.input_data.empty()) {
    INFERD_ASSIGN_OR_RETURN(input_sets, bench::InputsFromFile(f.input_data, model));
  } else {
    INFERD_ASSIGN_OR_RETURN(bench::RandomOptions ro, RandomOptionsFromFlags(f));
    std::pair<int64_t, int64_t> lengths{1, 1};
    int sets = 4;
    if (!f.sequence_lengths.empty()) {
      INFERD_ASSIGN_OR_RETURN(lengths, bench::ParseLengthRange(f.sequence_lengths));
      sets = f.request_count;
    }
    std::mt19937_64 rng(f.seed);
    std::uniform_int_distribution<int64_t> length(lengths.first, lengths.second);
    for (int i = 0; i < sets; ++i) {
      ro.length = length(rng);
      input_sets.push_back(bench::RandomInputs(model, f.batch_size, f.seed + static_cast<uint64_t>(i), ro));
    }
  }
  bench::LoadOptions lo;
  lo.make_sender =
      grpc ? bench::GrpcSenderFactory(f.grpc_url)
           : bench::HttpSenderFactory(target.first, target.second, bench::IsHttpsUrl(f.url) ? tls : nullptr);
  if (grpc) lo.closed_loop_driver = bench::H2GrpcClosedLoopDriver(f.grpc_url, f.grpc_channels);
  if (!f.then_model.empty()) {
    if (protocol != bench::Protocol::kV2Json || grpc) return Status::InvalidArgument("--then needs --protocol v2-json");
    INFERD_ASSIGN_OR_RETURN(auto renames, bench::ParseRenames(f.then_map));
    lo.make_sender = bench::ChainedHttpSenderFactory(target.first, target.second, f.then_model, std::move(renames));
  } else if (!grpc) {
    lo.http_host = target.first;  // open loop: one event-loop thread instead of a thread per connection
    lo.http_port = target.second;
  }
  std::vector<bench::RequestParameter> parameters;
  for (const auto& text : f.request_parameters) {
    INFERD_ASSIGN_OR_RETURN(auto p, bench::ParseRequestParameter(text));
    parameters.push_back(std::move(p));
  }
  if (grpc && !parameters.empty())
    return Status::InvalidArgument("--request-parameter needs --protocol v2-json or v2-binary");
  for (const auto& set : input_sets) {
    if (grpc) {
      lo.requests.push_back(bench::EncodeBenchRequest(model.name, f.version, set));
      continue;
    }
    INFERD_ASSIGN_OR_RETURN(auto req, bench::EncodeRequest(protocol, model, f.version, set, parameters));
    lo.requests.push_back(std::move(req));
  }
  lo.warmup_s = f.warmup_s;
  lo.window_s = f.window_s;
  lo.max_windows = f.max_windows;
  lo.tolerance = f.stability_pct / 100.0;
  lo.duration_s = f.duration_s;
  lo.max_connections = f.max_connections;
  lo.seed = f.seed;
  lo.host_stall_probe = f.host_stall_probe;
  lo.stall_guard_s = f.stall_guard_ms / 1e3;

  std::vector<bench::ReportRow> rows;
  const bool open_loop = !f.request_rate.empty();
  INFERD_ASSIGN_OR_RETURN(std::vector<double> loads, ParseList(open_loop ? f.request_rate : f.concurrency));
  bench::HttpClient stats_client(target.first, target.second, bench::IsHttpsUrl(f.url) ? tls : nullptr);
  for (double load : loads) {
    if (open_loop)
      lo.request_rate = load;
    else
      lo.concurrency = static_cast<int>(load);
    auto before = FetchStats(stats_client, f.model);
    bench::LoadResult r = bench::RunLoad(lo);
    auto after = FetchStats(stats_client, f.model);
    bench::ReportRow row;
    row.label = f.label.empty() ? f.model : f.label;
    row.mode = open_loop ? "rate" : "concurrency";
    row.load = load;
    row.protocol = f.protocol;
    row.batch_size = f.input_data.empty() ? f.batch_size : 1;
    row.summary = r.summary;
    row.stable = r.stable;
    row.windows = static_cast<int>(r.windows.size());
    row.server = Breakdown(before, after);
    row.host_stalls = r.host_stalls;
    row.first_error = r.first_error;
    std::cerr << "  " << row.mode << " " << load << ": " << row.summary.throughput << " req/s, p50 "
              << row.summary.p50_us << " us" << (r.stable ? "" : " (not stable)");
    if (r.host_stalls.probed) {
      std::cerr << "; host stalls " << r.host_stalls.count << " (" << r.host_stalls.stalled_s
                << " s), p99 outside them " << r.host_stalls.outside.p99_us << " us";
    }
    std::cerr << "\n";
    rows.push_back(std::move(row));
  }
  return rows;
}

int Bench(const BenchFlags& f) {
  if (f.generative) return BenchGenerative(f);
  if (!f.output.empty()) {
    if (auto fmt = OutputFormat(f.output, f.output_format); !fmt.ok()) {  // before measuring for minutes
      std::cerr << fmt.status().message() << "\n";
      return 2;
    }
  }
  Result<std::vector<bench::ReportRow>> rows = Status::Internal("unset");
  if (f.in_process) {
    if (f.repository.empty()) {
      std::cerr << "--in-process needs --model-repository\n";
      return 2;
    }
    BackendRegistry backends;
    if (Status st = RegisterBuiltinBackends(&backends); !st.ok()) {
      std::cerr << st.message() << "\n";
      return 1;
    }
    bench::InProcessOptions o;
    o.repository = f.repository;
    o.model = f.model;
    auto sizes = ParseList(f.batch_sizes);
    if (!sizes.ok()) {
      std::cerr << sizes.status().message() << "\n";
      return 2;
    }
    for (double s : *sizes) o.batch_sizes.push_back(static_cast<int>(s));
    o.batch_sizes.erase(o.batch_sizes.begin());  // drop the default {1}
    o.intra_op_threads = f.threads;
    o.warmup_s = f.warmup_s;
    o.window_s = f.window_s;
    o.seed = f.seed;
    auto random = RandomOptionsFromFlags(f);
    if (!random.ok()) {
      std::cerr << random.status().message() << "\n";
      return 2;
    }
    o.random = std::move(*random);
    rows = bench::RunInProcess(o, backends);
    if (rows.ok() && !f.label.empty())
      for (auto& r : *rows) r.label = f.label;
  } else {
    rows = RunRemote(f);
  }
  if (!rows.ok()) {
    std::cerr << "bench failed: " << rows.status().message() << "\n";
    return 1;
  }
  std::cout << bench::RenderTable(*rows);
  if (Status st = WriteOutput(f.output, f.output_format, *rows); !st.ok()) {
    std::cerr << st.message() << "\n";
    return 1;
  }
  // A run in which no request succeeded measured nothing: fail, with the cause.
  bool any_ok = false;
  std::string first_error;
  for (const auto& r : *rows) {
    any_ok = any_ok || r.summary.requests > 0;
    if (first_error.empty()) first_error = r.first_error;
  }
  if (!any_ok) {
    std::cerr << "bench failed: no request succeeded" << (first_error.empty() ? "" : ": " + first_error) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

void AddBenchCommand(CLI::App& app, std::function<int()>* run) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure a running server (perf_analyzer style) or a model in-process");
  cmd->add_option("-m,--model", f->model, "Model name")->required();
  cmd->add_option("--url", f->url, "Server to load (http://host:port, or https://host:port over TLS)")
      ->capture_default_str();
  cmd->add_option("--cacert", f->cacert,
                  "https:// URLs: PEM file of the CA that signed the server's certificate (default: the system's)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--metadata-url", f->metadata_url,
                  "Server to read the model metadata from, if not --url (for baselines without metadata)");
  cmd->add_option("--model-version", f->version, "Model version (default: the server's default)");
  cmd->add_option("--protocol", f->protocol, "v2-json | v2-binary | v1 | grpc (KServe v2 gRPC, raw tensors)")
      ->capture_default_str()
      ->check(CLI::IsMember({"v2-json", "v2-binary", "v1", "grpc"}));
  cmd->add_option("--grpc-channels", f->grpc_channels,
                  "With --protocol grpc, closed loop: HTTP/2 connections the requests in flight share as streams "
                  "(h2load's -c; one thread drives them all through libnghttp2, h2load's HTTP/2 library)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--grpc-url", f->grpc_url,
                  "With --protocol grpc: the gRPC endpoint (host:port); --url still serves metadata and statistics")
      ->capture_default_str();
  cmd->add_option("--concurrency", f->concurrency, "Closed loop: concurrent clients, a comma-separated sweep")
      ->capture_default_str();
  cmd->add_option("--request-rate", f->request_rate,
                  "Open loop: Poisson arrivals at these requests/s (comma-separated sweep); overrides --concurrency");
  cmd->add_option("--batch-size", f->batch_size, "Rows per request (batched models)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--input-data", f->input_data,
                  "JSON file {\"data\": [{input: values | {content, shape}}, ...]} instead of random data");
  cmd->add_option("--sequence-lengths", f->sequence_lengths,
                  "Mixed-length requests: variable dims (other than the batch dim) drawn uniformly in LO-HI");
  cmd->add_option("--request-count", f->request_count, "With --sequence-lengths: distinct requests, sent in turn")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--int-range", f->int_range, "Random integer inputs: uniform in LO:HI (e.g. token ids 1:30000)")
      ->capture_default_str();
  cmd->add_option("--constant-input", f->constant_inputs, "NAME=VALUE: that input filled with VALUE (e.g. mask=1)");
  cmd->add_option("--warmup-s", f->warmup_s, "Warm-up before measuring")->capture_default_str();
  cmd->add_option("--window-s", f->window_s, "Measurement window")->capture_default_str();
  cmd->add_option("--max-windows", f->max_windows, "Windows before giving up on stability")->capture_default_str();
  cmd->add_option("--stability-percentage", f->stability_pct,
                  "Stable when the last 3 windows' throughput and p50 are within this % of their mean")
      ->capture_default_str();
  cmd->add_option("--duration-s", f->duration_s, "Measure exactly this long instead of until stable")
      ->capture_default_str();
  cmd->add_option("--max-connections", f->max_connections, "Open loop: client connections")->capture_default_str();
  cmd->add_flag("--host-stall-probe", f->host_stall_probe,
                "Time a small unit of arithmetic every 5 ms in CPU time and report when the host slowed this "
                "machine's CPUs (a VM's hypervisor taking them), and the latencies of requests sent outside those "
                "stalls");
  cmd->add_option("--host-stall-guard-ms", f->stall_guard_ms,
                  "With --host-stall-probe: also leave out requests sent this long after a stall (its backlog)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 60000.0));
  cmd->add_option("--output", f->output, "Write the report to this file (format from its .json / .csv name)");
  cmd->add_option("--output-format", f->output_format, "Report format when the file name does not say: json | csv")
      ->check(CLI::IsMember({"json", "csv"}));
  cmd->add_option("--label", f->label, "Label for the report rows");
  cmd->add_option("--request-parameter", f->request_parameters,
                  "A request parameter name:value:type (type string, int or bool; v2 protocols), repeatable, as "
                  "perf_analyzer's: e.g. the key of a hybrid model, id:user-7:string");
  cmd->add_option("--seed", f->seed, "Random data and arrival seed")->capture_default_str();
  cmd->add_option("--then", f->then_model,
                  "Post each answer's outputs to this model as its inputs (a client calling two models back to back; "
                  "v2-json); latency covers both calls");
  cmd->add_option("--then-map", f->then_map, "With --then: output=input renames, comma-separated (others dropped)");
  cmd->add_flag("--in-process", f->in_process, "Call the model through the backend interface in this process");
  cmd->add_option("--model-repository", f->repository, "With --in-process: the repository holding the model");
  cmd->add_option("--batch-sizes", f->batch_sizes, "With --in-process: batch sizes to measure")->capture_default_str();
  cmd->add_option("--threads", f->threads, "With --in-process: intra-op threads")->capture_default_str();
  cmd->add_flag("--generative", f->generative,
                "Generative mode: stream completions from an OpenAI-compatible server (TTFT, TPOT, ITL, tokens/s)");
  cmd->add_option("--endpoint", f->endpoint, "With --generative: chat | completions")->capture_default_str();
  cmd->add_option("--num-prompts", f->num_prompts, "With --generative: requests (conversations)")
      ->capture_default_str();
  cmd->add_option("--turns", f->turns, "With --generative: requests per conversation (history resent each turn)")
      ->capture_default_str();
  cmd->add_option("--prompt-words", f->prompt_words, "With --generative: prompt length in words, mean[:spread]")
      ->capture_default_str();
  cmd->add_option("--output-tokens", f->output_tokens,
                  "With --generative: output tokens, mean[:spread] (exact: ignore_eos)")
      ->capture_default_str();
  cmd->add_option("--system-prompt", f->system_prompt, "With --generative: a system message every conversation shares");
  cmd->add_option("--slo-ttft-ms", f->slo_ttft_ms, "With --generative: goodput counts requests with TTFT within this");
  cmd->add_option("--slo-tpot-ms", f->slo_tpot_ms, "With --generative: ... and TPOT within this");
  cmd->callback([f, run] { *run = [f] { return Bench(*f); }; });
}

}  // namespace inferd::cli
