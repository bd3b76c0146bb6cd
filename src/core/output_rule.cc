#include "core/output_rule.h"

#include <charconv>
#include <cmath>
#include <sstream>

namespace inferd {
namespace {

std::vector<std::string> Words(std::string_view s) {
  std::vector<std::string> out;
  std::istringstream in{std::string(s)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

int64_t OutputRule::top_k() const {
  for (const Step& s : steps)
    if (s.op == Op::kTopK) return s.k;
  return 0;
}

DataType OutputRule::dtype() const {
  if (top_k() == 0) return DataType::kFp32;
  switch (steps.back().op) {
    case Op::kLabel:
    case Op::kMap:
      return DataType::kBytes;
    case Op::kScore:
      return DataType::kFp32;
    default:
      return DataType::kInt64;
  }
}

Shape OutputRule::dims(const Shape& source_dims) const {
  const int64_t k = top_k();
  return k == 0 ? source_dims : Shape{k};
}

Result<OutputRule> ParseOutputRule(const std::string& name, std::string_view text) {
  OutputRule r;
  r.name = name;
  r.text = std::string(Trim(text));
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("rule '" + name + "' (\"" + r.text + "\"): " + why);
  };
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t bar = text.find('|', start);
    parts.push_back(Trim(text.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start)));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  const auto source = Words(parts[0]);
  if (source.size() != 1) return bad("it starts with the name of the model output it reads");
  r.source = source[0];
  enum class State { kScores, kEntries, kLabels, kScore } state = State::kScores;
  for (size_t i = 1; i < parts.size(); ++i) {
    const auto w = Words(parts[i]);
    if (w.empty()) return bad("step " + std::to_string(i) + " is empty");
    OutputRule::Step s;
    const std::string& op = w[0];
    auto args = [&](size_t n) { return w.size() == n + 1; };
    if (op == "softmax" && args(0)) {
      if (state != State::kScores) return bad("softmax comes before top_k");
      s.op = OutputRule::Op::kSoftmax;
    } else if ((op == "top_k" && args(1)) || (op == "argmax" && args(0))) {
      if (state != State::kScores) return bad("one top_k or argmax per rule");
      s.op = OutputRule::Op::kTopK;
      s.k = 1;
      if (op == "top_k") {
        auto [p, ec] = std::from_chars(w[1].data(), w[1].data() + w[1].size(), s.k);
        if (ec != std::errc() || p != w[1].data() + w[1].size() || s.k < 1 || s.k > 1'000'000) {
          return bad("top_k takes a count >= 1, got '" + w[1] + "'");
        }
      }
      state = State::kEntries;
    } else if (op == "threshold" && args(2)) {
      if (state != State::kEntries) return bad("threshold comes after top_k or argmax");
      s.op = OutputRule::Op::kThreshold;
      char* end = nullptr;
      s.threshold = std::strtod(w[1].c_str(), &end);
      if (end != w[1].c_str() + w[1].size() || !std::isfinite(s.threshold)) {
        return bad("threshold takes a number and a fallback label, got '" + w[1] + "'");
      }
      s.fallback = w[2];
    } else if (op == "label" && args(0)) {
      if (state != State::kEntries) return bad("label comes after top_k or argmax");
      s.op = OutputRule::Op::kLabel;
      state = State::kLabels;
    } else if (op == "map" && w.size() >= 2) {
      if (state != State::kLabels) return bad("map comes after label");
      s.op = OutputRule::Op::kMap;
      for (size_t j = 1; j < w.size(); ++j) {
        const size_t eq = w[j].find('=');
        if (eq == std::string::npos || eq == 0) return bad("map takes FROM=TO pairs, got '" + w[j] + "'");
        s.renames[w[j].substr(0, eq)] = w[j].substr(eq + 1);
      }
    } else if (op == "score" && args(0)) {
      if (state != State::kEntries) return bad("score comes after top_k or argmax");
      s.op = OutputRule::Op::kScore;
      state = State::kScore;
    } else {
      return bad("unknown step '" + std::string(parts[i]) +
                 "' (softmax, top_k K, argmax, threshold T LABEL, label, map A=B, score)");
    }
    r.steps.push_back(std::move(s));
  }
  return r;
}

}  // namespace inferd
