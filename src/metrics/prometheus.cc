#include "metrics/prometheus.h"

#include <charconv>
#include <cmath>

namespace inferd {
namespace {
void AppendNumber(std::string* out, double v) {
  if (std::isinf(v)) {
    *out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  if (std::isnan(v)) {
    *out += "NaN";
    return;
  }
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, p);
}
}  // namespace

std::string EscapeLabelValue(std::string_view v) {
  std::string o;
  o.reserve(v.size());
  for (char c : v) {
    if (c == '\\')
      o += "\\\\";
    else if (c == '"')
      o += "\\\"";
    else if (c == '\n')
      o += "\\n";
    else
      o += c;
  }
  return o;
}

void PrometheusWriter::Family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += help;
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void PrometheusWriter::AppendLabels(const Labels& labels, std::string_view ek, std::string_view ev) {
  if (labels.empty() && ek.empty()) return;
  out_ += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) out_ += ',';
    first = false;
    out_ += k;
    out_ += "=\"";
    out_ += EscapeLabelValue(v);
    out_ += '"';
  }
  if (!ek.empty()) {
    if (!first) out_ += ',';
    out_ += ek;
    out_ += "=\"";
    out_ += ev;
    out_ += '"';
  }
  out_ += '}';
}

void PrometheusWriter::Sample(std::string_view name, const Labels& labels, double value) {
  out_ += name;
  AppendLabels(labels);
  out_ += ' ';
  AppendNumber(&out_, value);
  out_ += '\n';
}

void PrometheusWriter::HistogramSamples(std::string_view name, const Labels& labels, const Histogram::Snapshot& s) {
  const std::string bucket = std::string(name) + "_bucket";
  for (size_t i = 0; i <= s.bounds.size(); ++i) {
    std::string le;
    if (i < s.bounds.size())
      AppendNumber(&le, s.bounds[i]);
    else
      le = "+Inf";
    out_ += bucket;
    AppendLabels(labels, "le", le);
    out_ += ' ';
    AppendNumber(&out_, static_cast<double>(s.cumulative[i]));
    out_ += '\n';
  }
  Sample(std::string(name) + "_sum", labels, s.sum);
  Sample(std::string(name) + "_count", labels, static_cast<double>(s.count));
}

}  // namespace inferd
