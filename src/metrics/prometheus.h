// PrometheusWriter: builds the Prometheus text exposition format (0.0.4).
// Callers declare a family once (HELP/TYPE) and then add its samples.
//
// Thread-safety: none; one writer per scrape.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "metrics/histogram.h"

namespace inferd {

using Labels = std::vector<std::pair<std::string, std::string>>;

class PrometheusWriter {
 public:
  void Family(std::string_view name, std::string_view type, std::string_view help);
  void Sample(std::string_view name, const Labels& labels, double value);
  void HistogramSamples(std::string_view name, const Labels& labels, const Histogram::Snapshot& s);

  const std::string& text() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  void AppendLabels(const Labels& labels, std::string_view extra_key = {}, std::string_view extra_value = {});
  std::string out_;
};

// Escapes a label value (backslash, quote, newline).
std::string EscapeLabelValue(std::string_view v);

}  // namespace inferd
