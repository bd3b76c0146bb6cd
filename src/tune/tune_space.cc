#include "tune/tune_space.h"

#include <algorithm>
#include <charconv>

namespace inferd::tune {

std::string BatchingName(BatchingMode mode, uint64_t delay_us) {
  switch (mode) {
    case BatchingMode::kOff:
      return "off";
    case BatchingMode::kAdaptive:
      return "adaptive";
    case BatchingMode::kFixed:
      break;
  }
  return "delay " + std::to_string(delay_us) + " us";
}

std::string Candidate::ServerKey() const {
  std::string k = std::to_string(instances) + " instance" + (instances == 1 ? "" : "s") + " x " +
                  std::to_string(threads) + " thread" + (threads == 1 ? "" : "s") + ", batching " +
                  BatchingName(batching, delay_us);
  if (batching != BatchingMode::kOff) k += ", max batch " + std::to_string(max_batch_size);
  return k + (int8 ? ", int8" : ", fp32");
}

namespace {

int ParsePositive(const std::string& s, int fallback) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size() && v > 0 ? v : fallback;
}

// 1, 2, 4, ... up to `limit`, with `also` in, ascending and unique.
std::vector<int> Powers(int limit, int also) {
  std::vector<int> v;
  for (int x = 1; x <= limit; x *= 2) v.push_back(x);
  v.push_back(also);
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

ModelFacts FactsFromSpec(const ModelSpec& spec, const std::string& backend, bool int8_capable, int default_threads,
                         const std::string& start_protocol) {
  ModelFacts f;
  f.name = spec.name;
  f.backend = backend;
  f.max_batch_size = spec.max_batch_size;
  f.int8_capable = int8_capable;
  if (spec.parameters.count("nthread")) f.threads_key = "nthread";
  Candidate& c = f.current;
  c.protocol = start_protocol;
  c.instances = spec.instance_count;
  auto t = spec.parameters.find(f.threads_key);
  c.threads = t == spec.parameters.end() ? std::max(1, default_threads) : ParsePositive(t->second, 1);
  c.max_batch_size = spec.max_batch_size;
  if (spec.max_batch_size > 0 && spec.batching.dynamic) {
    auto mode = spec.parameters.find("batching.mode");
    c.batching =
        mode != spec.parameters.end() && mode->second == "adaptive" ? BatchingMode::kAdaptive : BatchingMode::kFixed;
    c.delay_us = spec.batching.max_queue_delay_us;
  }
  auto q = spec.parameters.find("quantization");
  c.int8 = int8_capable && q != spec.parameters.end() && q->second == "int8";
  return f;
}

void TuneSpace::AddAxis(Kind kind, const std::string& name, bool ordered, std::vector<Candidate> settings,
                        const Candidate& current) {
  if (!only_.empty() && !only_.count(name)) return;
  Dimension d{name, {}, ordered};
  int at = 0;
  for (size_t i = 0; i < settings.size(); ++i) {
    const Candidate& s = settings[i];
    switch (kind) {
      case Kind::kProtocol:
        d.values.push_back(s.protocol);
        if (s.protocol == current.protocol) at = static_cast<int>(i);
        break;
      case Kind::kInstances:
        d.values.push_back(std::to_string(s.instances));
        if (s.instances == current.instances) at = static_cast<int>(i);
        break;
      case Kind::kThreads:
        d.values.push_back(std::to_string(s.threads));
        if (s.threads == current.threads) at = static_cast<int>(i);
        break;
      case Kind::kBatching:
        d.values.push_back(BatchingName(s.batching, s.delay_us));
        if (s.batching == current.batching && (s.batching != BatchingMode::kFixed || s.delay_us == current.delay_us))
          at = static_cast<int>(i);
        break;
      case Kind::kMaxBatch:
        d.values.push_back(std::to_string(s.max_batch_size));
        if (s.max_batch_size == current.max_batch_size) at = static_cast<int>(i);
        break;
      case Kind::kInt8:
        d.values.push_back(s.int8 ? "on" : "off");
        if (s.int8 == current.int8) at = static_cast<int>(i);
        break;
    }
  }
  dims_.push_back(std::move(d));
  axes_.push_back({kind, std::move(settings)});
  start_.push_back(at);
}

TuneSpace::TuneSpace(const ModelFacts& facts, int cores, const std::vector<std::string>& protocols,
                     const std::set<std::string>& only)
    : facts_(facts), cores_(std::max(1, cores)), only_(only) {
  const Candidate& cur = facts.current;
  auto with = [&](auto set) {
    Candidate c = cur;
    set(c);
    return c;
  };
  std::vector<Candidate> v;
  std::vector<std::string> protos = protocols;
  if (std::find(protos.begin(), protos.end(), cur.protocol) == protos.end())
    protos.insert(protos.begin(), cur.protocol);
  for (const auto& p : protos) v.push_back(with([&](Candidate& c) { c.protocol = p; }));
  AddAxis(Kind::kProtocol, "protocol", false, std::move(v), cur);

  v.clear();
  for (int n : Powers(std::min(64, 2 * cores_), cur.instances))
    v.push_back(with([&](Candidate& c) { c.instances = n; }));
  AddAxis(Kind::kInstances, "instances", true, std::move(v), cur);

  v.clear();
  for (int n : Powers(cores_, cur.threads)) v.push_back(with([&](Candidate& c) { c.threads = n; }));
  AddAxis(Kind::kThreads, "threads", true, std::move(v), cur);

  if (facts.max_batch_size > 1) {
    v.clear();
    std::vector<std::pair<BatchingMode, uint64_t>> modes = {{BatchingMode::kOff, 0},
                                                            {BatchingMode::kFixed, 0},
                                                            {BatchingMode::kFixed, 500},
                                                            {BatchingMode::kFixed, 2000},
                                                            {BatchingMode::kAdaptive, 0}};
    if (cur.batching == BatchingMode::kFixed && cur.delay_us != 0 && cur.delay_us != 500 && cur.delay_us != 2000)
      modes.insert(modes.begin() + 4, {BatchingMode::kFixed, cur.delay_us});
    for (const auto& m : modes)
      v.push_back(with([&](Candidate& c) {
        c.batching = m.first;
        c.delay_us = m.first == BatchingMode::kAdaptive ? cur.delay_us : m.second;
      }));
    AddAxis(Kind::kBatching, "batching", false, std::move(v), cur);

    v.clear();
    for (int n : Powers(facts.max_batch_size, facts.max_batch_size))
      if (n <= facts.max_batch_size) v.push_back(with([&](Candidate& c) { c.max_batch_size = n; }));
    AddAxis(Kind::kMaxBatch, "max_batch_size", true, std::move(v), cur);
  }
  if (facts.int8_capable) {
    v = {with([](Candidate& c) { c.int8 = false; }), with([](Candidate& c) { c.int8 = true; })};
    AddAxis(Kind::kInt8, "int8", false, std::move(v), cur);
  }
}

Candidate TuneSpace::At(const Point& p) const {
  Candidate c = facts_.current;
  for (size_t i = 0; i < axes_.size() && i < p.size(); ++i) {
    const Candidate& s = axes_[i].settings[static_cast<size_t>(p[i])];
    switch (axes_[i].kind) {
      case Kind::kProtocol:
        c.protocol = s.protocol;
        break;
      case Kind::kInstances:
        c.instances = s.instances;
        break;
      case Kind::kThreads:
        c.threads = s.threads;
        break;
      case Kind::kBatching:
        c.batching = s.batching;
        c.delay_us = s.delay_us;
        break;
      case Kind::kMaxBatch:
        c.max_batch_size = s.max_batch_size;
        break;
      case Kind::kInt8:
        c.int8 = s.int8;
        break;
    }
  }
  return c;
}

bool TuneSpace::Allowed(const Point& p) const {
  if (p == start_) return true;
  const Candidate c = At(p);
  if (c.int8 && int8_refused_) return false;
  return c.instances * c.threads <= 2 * cores_;
}

ConfigEdit EditFor(const Candidate& c, const ModelFacts& facts) {
  ConfigEdit e;
  e.instance_count = c.instances;
  e.parameters[facts.threads_key] = std::to_string(c.threads);
  if (facts.max_batch_size > 0) {
    e.max_batch_size = c.max_batch_size;
    switch (c.batching) {
      case BatchingMode::kOff:
        e.batching = ConfigEdit::Batching::kOff;
        e.parameters["batching.mode"] = std::nullopt;
        break;
      case BatchingMode::kFixed:
        e.batching = ConfigEdit::Batching::kOn;
        e.max_queue_delay_us = c.delay_us;
        e.parameters["batching.mode"] = std::nullopt;
        break;
      case BatchingMode::kAdaptive:
        e.batching = ConfigEdit::Batching::kOn;
        e.parameters["batching.mode"] = "adaptive";
        break;
    }
  }
  if (facts.int8_capable) e.parameters["quantization"] = c.int8 ? std::optional<std::string>("int8") : std::nullopt;
  return e;
}

}  // namespace inferd::tune
