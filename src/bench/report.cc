#include "bench/report.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <thread>

#include "frontends/codec/json_writer.h"

namespace inferd::bench {

MachineInfo ReadMachineInfo() {
  MachineInfo m;
  std::ifstream cpu("/proc/cpuinfo");
  for (std::string line; std::getline(cpu, line);) {
    if (line.rfind("model name", 0) == 0) {
      m.cpu_model = line.substr(line.find(':') + 2);
      break;
    }
  }
  m.cores = static_cast<int>(std::thread::hardware_concurrency());
  m.inferd_version = "0.1.0";
  char buf[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  m.date = buf;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  m.host = host;
  return m;
}

std::string RenderTable(const std::vector<ReportRow>& rows) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-24s %-11s %7s %6s %11s %9s %9s %9s %9s %9s %6s %9s %9s %6s\n", "label", "mode",
                "load", "batch", "infer/s", "p50 us", "p90 us", "p95 us", "p99 us", "max us", "errors", "queue us",
                "compute", "stable");
  out += line;
  for (const auto& r : rows) {
    const double infer_per_s = r.summary.throughput * r.batch_size;
    std::snprintf(line, sizeof line, "%-24s %-11s %7g %6d %11.1f %9.1f %9.1f %9.1f %9.1f %9.1f %6llu %9s %9s %6s\n",
                  r.label.substr(0, 24).c_str(), r.mode.c_str(), r.load, r.batch_size, infer_per_s, r.summary.p50_us,
                  r.summary.p90_us, r.summary.p95_us, r.summary.p99_us, r.summary.max_us,
                  static_cast<unsigned long long>(r.summary.errors),
                  r.server.available ? std::to_string(static_cast<int64_t>(r.server.queue_us)).c_str() : "-",
                  r.server.available ? std::to_string(static_cast<int64_t>(r.server.compute_infer_us)).c_str() : "-",
                  r.stable ? "yes" : "no");
    out += line;
    if (r.host_stalls.probed) {
      const HostStalls& h = r.host_stalls;
      std::snprintf(line, sizeof line,
                    "  host stalls: %d, %.2f s of %.2f s; requests sent outside them and %.0f ms after: %llu, p50 %.1f "
                    "us, p99 %.1f us\n",
                    h.count, h.stalled_s, r.summary.duration_s, h.guard_s * 1e3,
                    static_cast<unsigned long long>(h.outside.requests), h.outside.p50_us, h.outside.p99_us);
      out += line;
    }
    if (!r.first_error.empty()) out += "  first error: " + r.first_error + "\n";
  }
  return out;
}

std::string RenderCsv(const std::vector<ReportRow>& rows) {
  std::string out =
      "label,mode,load,protocol,batch_size,requests_per_s,inferences_per_s,p50_us,p90_us,p95_us,p99_us,max_us,mean_us,"
      "requests,errors,server_queue_us,server_compute_input_us,server_compute_infer_us,server_compute_output_us,"
      "server_avg_batch_rows,stable,windows\n";
  char line[1024];
  for (const auto& r : rows) {
    std::snprintf(
        line, sizeof line,
        "\"%s\",%s,%g,%s,%d,%.3f,%.3f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%llu,%llu,%.1f,%.1f,%.1f,%.1f,%.2f,%d,%d\n",
        r.label.c_str(), r.mode.c_str(), r.load, r.protocol.c_str(), r.batch_size, r.summary.throughput,
        r.summary.throughput * r.batch_size, r.summary.p50_us, r.summary.p90_us, r.summary.p95_us, r.summary.p99_us,
        r.summary.max_us, r.summary.mean_us, static_cast<unsigned long long>(r.summary.requests),
        static_cast<unsigned long long>(r.summary.errors), r.server.queue_us, r.server.compute_input_us,
        r.server.compute_infer_us, r.server.compute_output_us, r.server.avg_batch_rows, r.stable ? 1 : 0, r.windows);
    out += line;
  }
  return out;
}

namespace {

// `{"count", "stalled_s", "guard_s", "outside": {...}, "stalls": [[start, end], ...]}`, or null unprobed.
void AppendHostStalls(std::string* b, const HostStalls& h) {
  if (!h.probed) {
    *b += "null";
    return;
  }
  auto fields = [b](std::initializer_list<std::pair<const char*, double>> nums) {
    const char* sep = "";
    for (const auto& [k, v] : nums) {
      *b += sep;
      sep = ",";
      json::AppendKey(b, k);
      json::AppendNumber(b, v);
    }
  };
  *b += "{";
  fields({{"count", static_cast<double>(h.count)}, {"stalled_s", h.stalled_s}, {"guard_s", h.guard_s}});
  *b += ",\"outside\":{";
  fields({{"requests", static_cast<double>(h.outside.requests)},
          {"p50_us", h.outside.p50_us},
          {"p90_us", h.outside.p90_us},
          {"p99_us", h.outside.p99_us},
          {"max_us", h.outside.max_us},
          {"mean_us", h.outside.mean_us}});
  *b += "},\"stalls\":[";
  for (size_t k = 0; k < h.stalls.size(); ++k) {
    *b += k ? ",[" : "[";
    json::AppendNumber(b, h.stalls[k].start_s);
    *b += ",";
    json::AppendNumber(b, h.stalls[k].end_s);
    *b += "]";
  }
  *b += "]}";
}

}  // namespace

std::string RenderJson(const std::vector<ReportRow>& rows, const MachineInfo& m) {
  using json::AppendEscaped;
  using json::AppendKey;
  using json::AppendNumber;
  std::string b = "{\"machine\":{";
  AppendKey(&b, "cpu_model");
  AppendEscaped(&b, m.cpu_model);
  b += ",\"cores\":";
  AppendNumber(&b, m.cores);
  b += ",\"inferd_version\":";
  AppendEscaped(&b, m.inferd_version);
  b += ",\"date\":";
  AppendEscaped(&b, m.date);
  b += ",\"host\":";
  AppendEscaped(&b, m.host);
  b += "},\"rows\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const auto& s = r.summary;
    if (i) b += ",";
    b += "{\"label\":";
    AppendEscaped(&b, r.label);
    b += ",\"mode\":";
    AppendEscaped(&b, r.mode);
    b += ",\"load\":";
    AppendNumber(&b, r.load);
    b += ",\"protocol\":";
    AppendEscaped(&b, r.protocol);
    b += ",\"batch_size\":";
    AppendNumber(&b, r.batch_size);
    const std::pair<const char*, double> nums[] = {{"requests_per_s", s.throughput},
                                                   {"inferences_per_s", s.throughput * r.batch_size},
                                                   {"p50_us", s.p50_us},
                                                   {"p90_us", s.p90_us},
                                                   {"p95_us", s.p95_us},
                                                   {"p99_us", s.p99_us},
                                                   {"max_us", s.max_us},
                                                   {"mean_us", s.mean_us},
                                                   {"requests", static_cast<double>(s.requests)},
                                                   {"errors", static_cast<double>(s.errors)},
                                                   {"duration_s", s.duration_s}};
    for (const auto& [k, v] : nums) {
      b += ",";
      AppendKey(&b, k);
      AppendNumber(&b, v);
    }
    b += ",\"stable\":";
    b += r.stable ? "true" : "false";
    b += ",\"windows\":";
    AppendNumber(&b, r.windows);
    b += ",\"server\":";
    if (r.server.available) {
      b += "{\"queue_us\":";
      AppendNumber(&b, r.server.queue_us);
      b += ",\"compute_input_us\":";
      AppendNumber(&b, r.server.compute_input_us);
      b += ",\"compute_infer_us\":";
      AppendNumber(&b, r.server.compute_infer_us);
      b += ",\"compute_output_us\":";
      AppendNumber(&b, r.server.compute_output_us);
      b += ",\"avg_batch_rows\":";
      AppendNumber(&b, r.server.avg_batch_rows);
      b += "}";
    } else {
      b += "null";
    }
    b += ",\"host_stalls\":";
    AppendHostStalls(&b, r.host_stalls);
    if (!r.first_error.empty()) {
      b += ",\"first_error\":";
      AppendEscaped(&b, r.first_error);
    }
    b += "}";
  }
  b += "]}";
  return b;
}

}  // namespace inferd::bench
