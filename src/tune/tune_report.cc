#include "tune/tune_report.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "repository/config_edit.h"

namespace inferd::tune {

namespace {

std::string F(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Dollars with 3 significant digits ("$0.00412").
std::string Usd(double v) {
  if (v < 0) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "$%.3g", v);
  return buf;
}

const SweepPoint* Operating(const Trial& t) {
  return t.operating >= 0 ? &t.sweep[static_cast<size_t>(t.operating)] : nullptr;
}

double Ratio(const TuneResult& r, const Trial& t) {
  const Trial& d = r.trials.front();
  return d.score.feasible && t.score.feasible && d.score.throughput > 0 ? t.score.throughput / d.score.throughput : 0;
}

size_t GridSize(const TuneResult& r) {
  size_t n = 1;
  for (const auto& d : r.dims) n *= d.values.size();
  return n;
}

std::string Header(const TuneResult& r) {
  const Trial& best = r.trials[static_cast<size_t>(r.best)];
  const SweepPoint& op = *Operating(best);
  std::string h = "Written by `inferd tune` on " + r.machine.date + " (" + r.machine.cpu_model + ", " +
                  std::to_string(r.cores) + " cores).\n";
  h += "Objective: p99 <= " + F(r.p99_ms, 2) + " ms. Measured: " + F(best.score.throughput, 0) +
       " predictions/s at p99 " + F(op.summary.p99_us / 1e3, 2) + " ms (concurrency " + std::to_string(op.concurrency) +
       ", " + best.candidate.protocol + ")";
  if (r.best != 0 && Ratio(r, best) > 0) h += ", " + F(Ratio(r, best), 2) + "x the model's own config";
  h += ".\nSettings: " + best.candidate.ServerKey() + "; clients: " + best.candidate.protocol + ".";
  return h;
}

}  // namespace

PointCost CostOf(const SweepPoint& p, int batch_size, int cores, double usd) {
  PointCost c;
  c.predictions_per_s = p.summary.throughput * batch_size;
  if (p.wall_s > 0) {
    c.server_cores = p.server_cpu_s >= 0 ? p.server_cpu_s / p.wall_s : -1;
    c.client_cores = p.client_cpu_s / p.wall_s;
  }
  if (c.predictions_per_s > 0) {
    const double per_core_s = usd / 3600.0;
    c.usd_per_million_machine = per_core_s * cores / c.predictions_per_s * 1e6;
    if (c.server_cores >= 0) c.usd_per_million_used = per_core_s * c.server_cores / c.predictions_per_s * 1e6;
  }
  return c;
}

Result<std::string> ChosenConfig(const TuneResult& r) {
  if (r.best < 0) return Status::NotFound("no candidate met the objective");
  const std::string header = Header(r);
  const Trial& best = r.trials[static_cast<size_t>(r.best)];
  if (best.candidate.ServerKey() == r.trials.front().candidate.ServerKey()) {
    std::string out;
    std::istringstream lines(header + (r.best == 0
                                           ? "\nThe model's own config was the best found; its text follows unchanged."
                                           : "\nThe server settings are the model's own (its text follows unchanged): "
                                             "the gain is the clients' protocol."));
    for (std::string line; std::getline(lines, line);) out += "# " + line + "\n";
    return out + r.original_config;
  }
  ConfigEdit e = EditFor(best.candidate, r.facts);
  e.header = header;
  return EditModelConfig(r.original_config, r.facts.name, e);
}

std::string Verdict(const TuneResult& r) {
  if (r.trials.empty()) return "Nothing was measured.";
  if (r.best < 0) {
    double lowest = INFINITY;
    std::string where;
    for (const auto& t : r.trials)
      if (t.score.p99_ms < lowest) {
        lowest = t.score.p99_ms;
        where = t.candidate.Key();
      }
    return "No candidate met p99 <= " + F(r.p99_ms, 2) + " ms: the lowest p99 measured was " +
           (std::isfinite(lowest) ? F(lowest, 2) + " ms (" + where + ")" : std::string("none (nothing served)")) +
           ". No config was written; raise --p99-ms or give the model more cores.";
  }
  const Trial& best = r.trials[static_cast<size_t>(r.best)];
  const Trial& def = r.trials.front();
  if (r.best == 0) {
    std::string s = "The model's own config is already the best found: " + F(def.score.throughput, 0) +
                    " predictions/s within the objective, and no candidate one move away beat it by more than " +
                    "the search's margin. The closest:";
    std::vector<const Trial*> others;
    for (size_t i = 1; i < r.trials.size(); ++i) others.push_back(&r.trials[i]);
    std::sort(others.begin(), others.end(),
              [](const Trial* a, const Trial* b) { return a->score.throughput > b->score.throughput; });
    for (size_t i = 0; i < others.size() && i < 3; ++i)
      s += (i ? "; " : " ") + others[i]->candidate.Key() + " " + F(Ratio(r, *others[i]), 2) + "x";
    return s + (others.empty() ? " none measured." : ".");
  }
  std::string s =
      "Chosen: " + best.candidate.Key() + ": " + F(best.score.throughput, 0) + " predictions/s within the objective";
  if (def.score.feasible)
    s += ", " + F(Ratio(r, best), 2) + "x the model's own config (" + F(def.score.throughput, 0) + " predictions/s)";
  else
    s += "; the model's own config did not meet the objective" + (def.note.empty() ? "" : " (" + def.note + ")");
  s += ".";
  if (best.candidate.protocol != def.candidate.protocol)
    s += " Clients should send " + best.candidate.protocol + " (the model's own config was measured with " +
         def.candidate.protocol + ").";
  return s;
}

std::string RenderTuneMarkdown(const TuneResult& r, double usd, const std::string& plot_file,
                               const std::string& config_file) {
  std::string md = "# inferd tune: " + r.facts.name + "\n\n";
  md += "`" + r.facts.name + "` (" + r.facts.backend + " backend) on " + r.machine.cpu_model + ", " +
        std::to_string(r.cores) + " cores, inferd " + r.machine.inferd_version + ", " + r.machine.date + ".\n";
  md += "Objective: **p99 <= " + F(r.p99_ms, 2) + " ms**, requests of " + std::to_string(r.batch_size) + " row" +
        (r.batch_size == 1 ? "" : "s") +
        ", closed loop (concurrency 1, 2, 4, ... until the p99 passes the objective "
        "or the throughput stops growing).\n\n";
  std::string dims;
  for (const auto& d : r.dims) {
    dims += (dims.empty() ? "" : "; ") + d.name + ": ";
    for (size_t i = 0; i < d.values.size(); ++i) dims += (i ? ", " : "") + d.values[i];
  }
  md += "Searched by hill climbing from the model's own config: " + std::to_string(r.trials.size()) +
        " candidates measured of the " + std::to_string(GridSize(r)) + " in the grid (" + dims + "), in " +
        F(r.elapsed_s, 0) + " s; stopped: " + r.stop_reason + ".\n\n";
  md += "## Result\n\n" + Verdict(r) + "\n\n";
  if (r.best >= 0) {
    const Trial& best = r.trials[static_cast<size_t>(r.best)];
    const PointCost c = CostOf(*Operating(best), r.batch_size, r.cores, usd);
    md += "Cost at $" + F(usd, 4) + " per core-hour: **" + Usd(c.usd_per_million_used) +
          " per 1M predictions** at the measured utilisation (the server used " + F(c.server_cores, 2) + " of " +
          std::to_string(r.cores) + " cores), " + Usd(c.usd_per_million_machine) + " per 1M if all " +
          std::to_string(r.cores) + " cores are paid for. The load generator ran on the same machine and used " +
          F(c.client_cores, 2) + " cores.\n\n";
    if (!config_file.empty()) md += "Config written to `" + config_file + "` (below).\n\n";
  }
  if (!plot_file.empty())
    md += "![throughput vs p99](" + plot_file +
          ")\n\nEvery point measured (grey), each candidate's best point "
          "within the objective (blue), the model's own config (green), the chosen config (red); the dashed line is "
          "the objective.\n\n";
  md +=
      "## Candidates\n\n| # | settings | protocol | predictions/s | p99 ms | concurrency | vs own config | "
      "server cores | $/1M used | $/1M machine | note |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < r.trials.size(); ++i) {
    const Trial& t = r.trials[i];
    const SweepPoint* op = Operating(t);
    const PointCost c = op ? CostOf(*op, r.batch_size, r.cores, usd) : PointCost{};
    std::string note = t.note;
    if (i == 0) note = "the model's own config" + (note.empty() ? "" : "; " + note);
    if (static_cast<int>(i) == r.best) note = "**chosen**" + (note.empty() ? "" : "; " + note);
    if (!op && t.note.empty()) note += (note.empty() ? "" : "; ") + std::string("objective not met");
    md += "| " + std::to_string(i + 1) + " | " + t.candidate.ServerKey() + " | " + t.candidate.protocol + " | " +
          (op ? F(c.predictions_per_s, 0) : "-") + " | " + (op ? F(op->summary.p99_us / 1e3, 2) : "-") + " | " +
          (op ? std::to_string(op->concurrency) : "-") + " | " +
          (op && Ratio(r, t) > 0 ? F(Ratio(r, t), 2) + "x" : "-") + " | " +
          (op && c.server_cores >= 0 ? F(c.server_cores, 2) : "-") + " | " + (op ? Usd(c.usd_per_million_used) : "-") +
          " | " + (op ? Usd(c.usd_per_million_machine) : "-") + " | " + note + " |\n";
  }
  auto config = ChosenConfig(r);
  if (config.ok()) md += "\n## The chosen config.pbtxt\n\n```\n" + *config + "```\n";
  return md;
}

std::string RenderTuneJson(const TuneResult& r, double usd) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  auto num = [&](const char* k, double v) {
    w.Key(k);
    if (std::isfinite(v))
      w.Double(v);
    else
      w.Null();
  };
  auto str = [&](const char* k, const std::string& v) {
    w.Key(k);
    w.String(v.c_str());
  };
  w.StartObject();
  str("model", r.facts.name);
  str("backend", r.facts.backend);
  w.Key("machine");
  w.StartObject();
  str("cpu_model", r.machine.cpu_model);
  w.Key("cores");
  w.Int(r.cores);
  str("inferd_version", r.machine.inferd_version);
  str("date", r.machine.date);
  str("host", r.machine.host);
  w.EndObject();
  num("objective_p99_ms", r.p99_ms);
  w.Key("batch_size");
  w.Int(r.batch_size);
  num("core_hour_usd", usd);
  w.Key("search");
  w.StartObject();
  str("method", "hill climbing from the model's own config");
  w.Key("dimensions");
  w.StartArray();
  for (const auto& d : r.dims) {
    w.StartObject();
    str("name", d.name);
    w.Key("values");
    w.StartArray();
    for (const auto& v : d.values) w.String(v.c_str());
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("grid_size");
  w.Uint64(GridSize(r));
  w.Key("candidates_measured");
  w.Uint64(r.trials.size());
  str("stop_reason", r.stop_reason);
  num("elapsed_s", r.elapsed_s);
  w.EndObject();
  w.Key("default");
  w.Int(r.trials.empty() ? -1 : 0);
  w.Key("chosen");
  w.Int(r.best);
  num("chosen_vs_default", r.best >= 0 ? Ratio(r, r.trials[static_cast<size_t>(r.best)]) : 0);
  str("verdict", Verdict(r));
  w.Key("candidates");
  w.StartArray();
  for (const auto& t : r.trials) {
    const Candidate& c = t.candidate;
    w.StartObject();
    str("key", c.Key());
    w.Key("settings");
    w.StartObject();
    str("protocol", c.protocol);
    w.Key("instances");
    w.Int(c.instances);
    w.Key("threads");
    w.Int(c.threads);
    str("batching", c.batching == BatchingMode::kOff        ? "off"
                    : c.batching == BatchingMode::kAdaptive ? "adaptive"
                                                            : "fixed");
    w.Key("max_queue_delay_us");
    w.Uint64(c.delay_us);
    w.Key("max_batch_size");
    w.Int(c.max_batch_size);
    w.Key("int8");
    w.Bool(c.int8);
    w.EndObject();
    w.Key("feasible");
    w.Bool(t.score.feasible);
    num("predictions_per_s", t.score.feasible ? t.score.throughput : 0);
    num("p99_ms", t.score.p99_ms);
    w.Key("operating_point");
    w.Int(t.operating);
    str("note", t.note);
    num("started_s", t.start_s);
    num("server_start_s", t.server_start_s);
    w.Key("points");
    w.StartArray();
    for (const auto& p : t.sweep) {
      const PointCost pc = CostOf(p, r.batch_size, r.cores, usd);
      w.StartObject();
      w.Key("concurrency");
      w.Int(p.concurrency);
      num("requests_per_s", p.summary.throughput);
      num("predictions_per_s", pc.predictions_per_s);
      num("p50_ms", p.summary.p50_us / 1e3);
      num("p99_ms", p.summary.p99_us / 1e3);
      w.Key("requests");
      w.Uint64(p.summary.requests);
      w.Key("errors");
      w.Uint64(p.summary.errors);
      w.Key("stable");
      w.Bool(p.stable);
      num("server_cores", pc.server_cores);
      num("client_cores", pc.client_cores);
      num("usd_per_million_used", pc.usd_per_million_used);
      num("usd_per_million_machine", pc.usd_per_million_machine);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return buf.GetString();
}

}  // namespace inferd::tune
