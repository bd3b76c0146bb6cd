// The web console's server-side parsing and arithmetic. The first byte picks:
//  0: the input as a query string: every key's value decodes without reading past the input (a value never grows
//     longer than the query).
//  1: model statistics built from the input (counters that go back and forth, histograms of any shape, names with
//     any bytes), sampled tick after tick: the live charts' JSON then parses, with at most `history` points.
//  2: a histogram from the input: a quantile is within [0, the largest bound].
#include <rapidjson/document.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "console/live_stats.h"
#include "console/query.h"
#include "fuzz_reader.h"

namespace {

using namespace inferd;
using fuzz::Check;
using fuzz::Reader;

void Query(std::string_view q) {
  for (const char* key : {"model", "points", "limit", "", "a"}) {
    Check(console::QueryValue(q, key).size() <= q.size());
  }
}

void Live(Reader r) {
  std::vector<ModelStatsSnapshot> snaps;
  const size_t history = 1 + r.Byte() % 8;
  console::LiveStats live(console::LiveOptions{std::chrono::milliseconds(1000), history, 1 + r.Byte() % 4u},
                          [&] { return snaps; });
  int64_t t = 0;
  size_t ticks = 0;
  while (!r.in.empty() && ticks < 16) {
    snaps.clear();
    const int n = r.Byte() % 4;
    for (int i = 0; i < n; ++i) {
      ModelStatsSnapshot s;
      s.name = r.Str(6);
      s.version = std::to_string(r.Byte() % 3);
      s.success.count = r.U64() % 1000;
      s.fail.count = r.Byte();
      s.queue.count = r.Byte();
      s.queue.ns = r.U64();
      const size_t bounds = r.Byte() % 5;
      for (size_t b = 0; b < bounds; ++b) s.request_us.bounds.push_back(static_cast<double>(r.Byte()) * 10);
      const size_t counts = r.Byte() % 6;
      for (size_t c = 0; c < counts; ++c) s.request_us.cumulative.push_back(r.Byte());
      snaps.push_back(std::move(s));
    }
    t += static_cast<int64_t>(r.Byte()) * 100 - 5000;  // time may even go backwards
    live.Sample(t);
    ++ticks;
  }
  // The JSON once, after the ticks (parsing it after each one made this the slowest target).
  rapidjson::Document d;
  const std::string json = live.Json(ticks % 2 ? "" : "a", ticks % 4);
  d.Parse(json.c_str(), json.size());
  Check(!d.HasParseError() && d.IsObject() && d["series"].IsArray());
  for (const auto& series : d["series"].GetArray()) {
    Check(series["rps"].Size() <= history && series["t"].Size() == series["rps"].Size());
  }
}

void Quantile(Reader r) {
  std::vector<double> bounds;
  std::vector<uint64_t> cumulative;
  const size_t n = r.Byte() % 8;
  double b = 0;
  for (size_t i = 0; i < n; ++i) bounds.push_back(b += r.Byte());
  uint64_t c = 0;
  for (size_t i = 0; i <= n; ++i) cumulative.push_back(c += r.Byte());
  const double q = static_cast<double>(r.Byte()) / 255.0;
  const double v = console::HistogramQuantile(q, bounds, cumulative);
  Check(v >= 0 && (bounds.empty() || v <= bounds.back()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      Query(in);
      break;
    case 1:
      Live(Reader{in});
      break;
    default:
      Quantile(Reader{in});
  }
  return 0;
}
