// Tracing's parsers and encoders. The first byte picks:
//  0: the input as a traceparent header: a parsed one formats back to an
//     equal context; and as a tracestate (what passes is printable, <= 512).
//  1: the input's lines as --trace-config settings: a parsed config is
//     consistent (batch <= queue, a readable url).
//  2: spans built from the input (names, attribute strings, ids, times,
//     kinds): the protobuf body must parse with OTLP's messages and give the
//     same ids, times and counts back; the JSON body must parse.
//  3: an access-log record from the input's fields: one line of JSON.
#include <rapidjson/document.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_reader.h"
#include "otlp_trace.pb.h"
#include "tracing/access_log.h"
#include "tracing/otlp_encoder.h"
#include "tracing/trace_config.h"
#include "tracing/trace_context.h"

namespace {

using namespace inferd;
using fuzz::Check;
using fuzz::Reader;

void Traceparent(std::string_view in) {
  auto c = tracing::ParseTraceparent(in);
  if (c.ok()) {
    Check(c->trace_id.valid() && c->parent_id != 0);
    auto back = tracing::ParseTraceparent(tracing::FormatTraceparent(c->trace_id, c->parent_id, c->sampled));
    Check(back.ok() && back->trace_id == c->trace_id && back->parent_id == c->parent_id && back->sampled == c->sampled);
  }
  const std::string state = tracing::SanitizeTracestate(in);
  Check(state.size() <= 512);
  for (char ch : state) Check(ch >= 0x20 && ch <= 0x7e);
}

void Config(std::string_view in) {
  std::vector<std::string> settings;
  size_t start = 0;
  while (start <= in.size() && settings.size() < 32) {
    const size_t nl = in.find('\n', start);
    settings.emplace_back(in.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  auto c = tracing::ParseTraceConfig(settings);
  if (!c.ok()) return;
  Check(c->max_export_batch_size >= 1 && c->max_export_batch_size <= c->max_queue_size);
  Check(tracing::ParseCollectorUrl(c->url).ok());
}

void Encode(std::string_view in) {
  Reader r{in};
  std::deque<std::string> keep;  // attribute keys and event names are views (literals in the server)
  std::vector<SpanRecord> spans(r.Byte() % 8);
  for (auto& s : spans) {
    s.trace_id = {r.U64(), r.U64()};
    s.span_id = r.U64();
    s.parent_span_id = r.U64();
    s.trace_state = r.Str();
    s.name = r.Str();
    s.kind = static_cast<SpanKind>(1 + r.Byte() % 3);
    s.start_unix_ns = static_cast<int64_t>(r.U64());
    s.end_unix_ns = static_cast<int64_t>(r.U64());
    for (int i = r.Byte() % 4; i > 0; --i) {
      std::string_view key = keep.emplace_back(r.Str());
      switch (r.Byte() % 4) {
        case 0:
          s.attributes.push_back({key, r.Str()});
          break;
        case 1:
          s.attributes.push_back({key, static_cast<int64_t>(r.U64())});
          break;
        case 2: {
          double d;
          const uint64_t bits = r.U64();
          std::memcpy(&d, &bits, sizeof d);
          s.attributes.push_back({key, d});
          break;
        }
        default:
          s.attributes.push_back({key, r.Byte() % 2 == 0});
          break;
      }
    }
    for (int i = r.Byte() % 3; i > 0; --i) {
      std::string_view name = keep.emplace_back(r.Str());
      s.events.push_back({name, static_cast<int64_t>(r.U64())});
    }
    s.dropped_attributes = r.Byte() % 4 == 0 ? static_cast<uint32_t>(r.U64()) : 0;
    s.dropped_events = r.Byte() % 4 == 0 ? static_cast<uint32_t>(r.U64()) : 0;
    s.status = static_cast<SpanStatus>(r.Byte() % 3);
    s.status_message = r.Str();
  }
  tracing::OtlpResource res;
  res.attributes = {{r.Str(), r.Str()}};
  const std::string pb = tracing::EncodeOtlpProtobuf(res, spans);
  inferd::otlp::ExportTraceServiceRequest req;
  Check(req.ParseFromString(pb));
  Check(req.resource_spans_size() == 1 && req.resource_spans(0).scope_spans_size() == 1);
  const auto& got = req.resource_spans(0).scope_spans(0).spans();
  Check(got.size() == static_cast<int>(spans.size()));
  for (size_t i = 0; i < spans.size(); ++i) {
    Check(got[static_cast<int>(i)].span_id().size() == 8 && got[static_cast<int>(i)].trace_id().size() == 16);
    Check(got[static_cast<int>(i)].start_time_unix_nano() == static_cast<uint64_t>(spans[i].start_unix_ns));
    Check(got[static_cast<int>(i)].attributes_size() == static_cast<int>(spans[i].attributes.size()));
    Check(got[static_cast<int>(i)].events_size() == static_cast<int>(spans[i].events.size()));
    Check(got[static_cast<int>(i)].dropped_attributes_count() == spans[i].dropped_attributes);
    Check(got[static_cast<int>(i)].dropped_events_count() == spans[i].dropped_events);
  }
  const std::string json = tracing::EncodeOtlpJson(res, spans);
  rapidjson::Document d;
  d.Parse(json.data(), json.size());
  Check(!d.HasParseError());
}

void AccessLine(std::string_view in) {
  Reader r{in};
  tracing::AccessRecord rec;
  rec.unix_ns = static_cast<int64_t>(r.U64() >> 2);
  rec.client = r.Str();
  rec.method = r.Str();
  rec.target = r.Str();
  rec.model = r.Str();
  rec.version = r.Str();
  rec.status = static_cast<int>(r.U64());
  uint64_t bits = r.U64();
  std::memcpy(&rec.latency_ms, &bits, sizeof bits);
  rec.trace_id = r.Str();
  rec.request_id = r.Str();
  const std::string line = tracing::FormatAccessRecord(rec);
  Check(line.find('\n') == std::string::npos);
  rapidjson::Document d;
  d.Parse(line.data(), line.size());
  Check(!d.HasParseError() && d.IsObject());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      Traceparent(in);
      break;
    case 1:
      Config(in);
      break;
    case 2:
      Encode(in);
      break;
    default:
      AccessLine(in);
      break;
  }
  return 0;
}
