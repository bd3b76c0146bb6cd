#include <rapidjson/document.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "gtest/gtest.h"
#include "otlp_trace.pb.h"
#include "testing/fake_clock.h"
#include "testing/free_port.h"
#include "testing/temp_dir.h"
#include "tracing/access_log.h"
#include "tracing/otlp_encoder.h"
#include "tracing/otlp_http.h"
#include "tracing/request_observer.h"
#include "tracing/span_exporter.h"
#include "tracing/trace_config.h"
#include "tracing/trace_context.h"
#include "tracing/trace_service.h"

namespace inferd::tracing {
namespace {

using testing::FakeClock;

// ---- W3C trace context ----

TEST(Traceparent, ReadsTheFourFields) {
  auto c = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->trace_id.hi, 0x4bf92f3577b34da6ull);
  EXPECT_EQ(c->trace_id.lo, 0xa3ce929d0e0e4736ull);
  EXPECT_EQ(c->parent_id, 0x00f067aa0ba902b7ull);
  EXPECT_TRUE(c->sampled);
  auto unsampled = ParseTraceparent(" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00\t");
  ASSERT_TRUE(unsampled.ok());
  EXPECT_FALSE(unsampled->sampled);
}

TEST(Traceparent, RefusesWhatTheSpecRefuses) {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",           // no flags
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",        // upper case
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",        // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",        // zero parent id
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",        // version ff
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  // version 00 has 4 fields
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
       }) {
    EXPECT_FALSE(ParseTraceparent(bad).ok()) << bad;
  }
}

TEST(Traceparent, ReadsALaterVersionByItsFirstFields) {
  auto c = ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-whatever");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->sampled);
  EXPECT_FALSE(ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x").ok());
}

TEST(Traceparent, FormatsWhatItReads) {
  const TraceId id{0x0123456789abcdefull, 0xfedcba9876543210ull};
  const std::string h = FormatTraceparent(id, 0x1122334455667788ull, true);
  EXPECT_EQ(h, "00-0123456789abcdeffedcba9876543210-1122334455667788-01");
  auto back = ParseTraceparent(h);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->trace_id, id);
  EXPECT_EQ(back->parent_id, 0x1122334455667788ull);
  EXPECT_EQ(SanitizeTracestate(" vendor=a,other=b "), "vendor=a,other=b");
  EXPECT_EQ(SanitizeTracestate(std::string(513, 'a')), "");
  EXPECT_EQ(SanitizeTracestate("a=\x01"), "");
}

// ---- --trace-config ----

TEST(TraceConfig, ReadsTritonsFlags) {
  auto c = ParseTraceConfig({"mode=opentelemetry", "rate=5", "count=100", "level=TIMESTAMPS",
                             "opentelemetry,url=localhost:9999/v1/traces", "opentelemetry,resource=service.name=x",
                             "opentelemetry,resource=deployment=prod", "opentelemetry,protocol=http/json",
                             "opentelemetry,bsp_max_queue_size=100", "opentelemetry,bsp_max_export_batch_size=10",
                             "opentelemetry,bsp_schedule_delay=250"});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->enabled);
  EXPECT_EQ(c->rate, 5u);
  EXPECT_EQ(c->count, 100);
  EXPECT_EQ(c->url, "localhost:9999/v1/traces");
  EXPECT_EQ(c->encoding, TraceConfig::Encoding::kJson);
  ASSERT_EQ(c->resource.size(), 2u);
  EXPECT_EQ(c->resource[0], (std::pair<std::string, std::string>{"service.name", "x"}));
  EXPECT_EQ(c->resource[1], (std::pair<std::string, std::string>{"deployment", "prod"}));
  EXPECT_EQ(c->max_queue_size, 100u);
  EXPECT_EQ(c->max_export_batch_size, 10u);
  EXPECT_EQ(c->schedule_delay, std::chrono::milliseconds(250));
}

TEST(TraceConfig, OffUnlessModeIsOpenTelemetryAndTheLevelIsNotOff) {
  auto none = ParseTraceConfig({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->enabled);
  auto off = ParseTraceConfig({"mode=opentelemetry", "level=OFF"});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->enabled);
  auto tensors = ParseTraceConfig({"mode=opentelemetry", "level=TIMESTAMPS", "level=TENSORS"});
  ASSERT_TRUE(tensors.ok());
  EXPECT_TRUE(tensors->enabled);
  EXPECT_EQ(tensors->notes.size(), 1u);
}

TEST(TraceConfig, NamesTheSettingThatIsWrong) {
  struct Case {
    std::vector<std::string> settings;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{"rate=5"}, "mode=opentelemetry"},
           {{"mode=triton"}, "not supported"},
           {{"mode=opentelemetry", "rate=-1"}, "rate"},
           {{"mode=opentelemetry", "count=-2"}, "count"},
           {{"mode=opentelemetry", "level=LOUD"}, "level"},
           {{"mode=opentelemetry", "sample=1"}, "unknown setting"},
           {{"mode=opentelemetry", "triton,file=/tmp/t.json"}, "not supported"},
           {{"mode=opentelemetry", "zipkin,url=x"}, "unknown mode"},
           {{"mode=opentelemetry", "opentelemetry,url=https://collector:4318"}, "https"},
           {{"mode=opentelemetry", "opentelemetry,url=http://:4318"}, "host"},
           {{"mode=opentelemetry", "opentelemetry,url=http://c:99999/v1/traces"}, "port"},
           {{"mode=opentelemetry", "opentelemetry,protocol=grpc"}, "protocol"},
           {{"mode=opentelemetry", "opentelemetry,bsp_max_queue_size=0"}, "bsp_max_queue_size"},
           {{"mode=opentelemetry", "opentelemetry,bsp_schedule_delay=0"}, "bsp_schedule_delay"},
           {{"mode=opentelemetry", "opentelemetry,resource=novalue"}, "resource"},
           {{"mode=opentelemetry", "opentelemetry,bsp_max_queue_size=4", "opentelemetry,bsp_max_export_batch_size=8"},
            "exceeds"},
           {{"noequals"}, "<setting>=<value>"},
       }) {
    auto r = ParseTraceConfig(c.settings);
    ASSERT_FALSE(r.ok()) << c.settings.back();
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status().message();
  }
}

TEST(TraceConfig, ReadsCollectorUrls) {
  auto a = ParseCollectorUrl("http://localhost:4318/v1/traces");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "localhost");
  EXPECT_EQ(a->port, 4318);
  EXPECT_EQ(a->path, "/v1/traces");
  auto b = ParseCollectorUrl("collector:1234");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "collector");
  EXPECT_EQ(b->port, 1234);
  EXPECT_EQ(b->path, "/v1/traces");
  auto c = ParseCollectorUrl("http://[::1]:5000/otlp");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->port, 5000);
  EXPECT_EQ(c->path, "/otlp");
}

// ---- OTLP encoding ----

SpanRecord SampleSpan() {
  SpanRecord s;
  s.trace_id = {0x0102030405060708ull, 0x090a0b0c0d0e0f10ull};
  s.span_id = 0x1112131415161718ull;
  s.parent_span_id = 0x2122232425262728ull;
  s.trace_state = "vendor=1";
  s.name = "compute";
  s.kind = SpanKind::kServer;
  s.start_unix_ns = 1'700'000'000'000'000'001;
  s.end_unix_ns = 1'700'000'000'000'500'000;
  s.attributes.push_back({"triton.model_name", std::string("mlp")});
  s.attributes.push_back({"triton.model_version", int64_t{-3}});
  s.attributes.push_back({"ratio", 0.25});
  s.attributes.push_back({"ok", true});
  s.attributes.push_back({"bad.utf8", std::string("a\xff\xc3")});
  s.events.push_back({"COMPUTE_START", 1'700'000'000'000'100'000});
  s.status = SpanStatus::kError;
  s.status_message = "model \"mlp\" failed";
  return s;
}

TEST(OtlpEncoder, ProtobufReadsBackWithOtlpsMessages) {
  OtlpResource res;
  res.attributes = {{"service.name", "inferd"}};
  SpanRecord root = SampleSpan();
  root.parent_span_id = 0;
  root.trace_state.clear();
  root.status = SpanStatus::kUnset;
  const std::string body = EncodeOtlpProtobuf(res, {SampleSpan(), root});
  otlp::ExportTraceServiceRequest req;
  ASSERT_TRUE(req.ParseFromString(body));
  ASSERT_EQ(req.resource_spans_size(), 1);
  const auto& rs = req.resource_spans(0);
  ASSERT_EQ(rs.resource().attributes_size(), 1);
  EXPECT_EQ(rs.resource().attributes(0).key(), "service.name");
  EXPECT_EQ(rs.resource().attributes(0).value().string_value(), "inferd");
  ASSERT_EQ(rs.scope_spans_size(), 1);
  EXPECT_EQ(rs.scope_spans(0).scope().name(), "inferd");
  ASSERT_EQ(rs.scope_spans(0).spans_size(), 2);
  const auto& s = rs.scope_spans(0).spans(0);
  EXPECT_EQ(s.trace_id(), std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10", 16));
  EXPECT_EQ(s.span_id(), std::string("\x11\x12\x13\x14\x15\x16\x17\x18", 8));
  EXPECT_EQ(s.parent_span_id(), std::string("\x21\x22\x23\x24\x25\x26\x27\x28", 8));
  EXPECT_EQ(s.trace_state(), "vendor=1");
  EXPECT_EQ(s.name(), "compute");
  EXPECT_EQ(s.kind(), otlp::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(s.start_time_unix_nano(), 1'700'000'000'000'000'001ull);
  EXPECT_EQ(s.end_time_unix_nano(), 1'700'000'000'000'500'000ull);
  ASSERT_EQ(s.attributes_size(), 5);
  EXPECT_EQ(s.attributes(0).value().string_value(), "mlp");
  EXPECT_EQ(s.attributes(1).value().int_value(), -3);
  EXPECT_EQ(s.attributes(2).value().double_value(), 0.25);
  EXPECT_TRUE(s.attributes(3).value().bool_value());
  EXPECT_EQ(s.attributes(4).value().string_value(), "a\xef\xbf\xbd\xef\xbf\xbd");  // invalid UTF-8 replaced
  ASSERT_EQ(s.events_size(), 1);
  EXPECT_EQ(s.events(0).name(), "COMPUTE_START");
  EXPECT_EQ(s.events(0).time_unix_nano(), 1'700'000'000'000'100'000ull);
  EXPECT_EQ(s.status().code(), otlp::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(s.status().message(), "model \"mlp\" failed");
  EXPECT_EQ(s.flags() & 0xff, 1u);
  const auto& r = rs.scope_spans(0).spans(1);
  EXPECT_TRUE(r.parent_span_id().empty());
  EXPECT_FALSE(r.has_status());
}

TEST(OtlpEncoder, FindsANonAsciiByteAtAnyPlaceInTextOfAnyLength) {
  // The ASCII test reads words, halves and bytes by length: one byte 0xff anywhere must still be cleaned.
  for (size_t n = 1; n <= 40; ++n) {
    for (size_t at = 0; at < n; ++at) {
      SpanRecord s = SampleSpan();
      s.attributes.clear();
      std::string text(n, 'a');
      text[at] = '\xff';
      s.attributes.push_back({"t", text});
      s.name = text;
      otlp::ExportTraceServiceRequest req;
      ASSERT_TRUE(req.ParseFromString(EncodeOtlpProtobuf({}, {s}))) << n << " " << at;
      std::string want = text;
      want.replace(at, 1, "\xef\xbf\xbd");
      const auto& sent = req.resource_spans(0).scope_spans(0).spans(0);
      EXPECT_EQ(sent.attributes(0).value().string_value(), want) << n << " " << at;
      EXPECT_EQ(sent.name(), want) << n << " " << at;
    }
  }
}

TEST(OtlpEncoder, FragmentsMakeOneBodyAndCarryTheDroppedCounts) {
  OtlpResource res;
  SpanRecord a = SampleSpan(), b = SampleSpan();
  b.dropped_attributes = 3;
  b.dropped_events = 1;
  std::string pb, js;
  AppendOtlpProtobufSpan(&pb, a);
  AppendOtlpProtobufSpan(&pb, b);
  AppendOtlpJsonSpan(&js, a);
  AppendOtlpJsonSpan(&js, b);
  otlp::ExportTraceServiceRequest req;
  ASSERT_TRUE(req.ParseFromString(WrapOtlpProtobuf(res, pb)));
  const auto& spans = req.resource_spans(0).scope_spans(0).spans();
  ASSERT_EQ(spans.size(), 2);
  EXPECT_EQ(spans[0].dropped_attributes_count(), 0u);
  EXPECT_EQ(spans[1].dropped_attributes_count(), 3u);
  EXPECT_EQ(spans[1].dropped_events_count(), 1u);
  rapidjson::Document d;
  const std::string body = WrapOtlpJson(res, js);
  d.Parse(body.data(), body.size());
  ASSERT_FALSE(d.HasParseError()) << body;
  const auto& json_spans = d["resourceSpans"][0]["scopeSpans"][0]["spans"];
  ASSERT_EQ(json_spans.Size(), 2u);  // the fragments' separators: one between the two, none before the first
  EXPECT_STREQ(json_spans[0]["name"].GetString(), "compute");
  EXPECT_FALSE(json_spans[0].HasMember("droppedAttributesCount"));
  EXPECT_EQ(json_spans[1]["droppedAttributesCount"].GetInt(), 3);
  EXPECT_EQ(json_spans[1]["droppedEventsCount"].GetInt(), 1);
  // No spans: a valid empty body either way.
  ASSERT_TRUE(req.ParseFromString(WrapOtlpProtobuf(res, "")));
  EXPECT_EQ(req.resource_spans(0).scope_spans(0).spans_size(), 0);
  d.Parse(WrapOtlpJson(res, "").c_str());
  EXPECT_FALSE(d.HasParseError());
}

TEST(OtlpEncoder, JsonIsOtlpsJsonForm) {
  OtlpResource res;
  res.attributes = {{"service.name", "inferd"}};
  const std::string body = EncodeOtlpJson(res, {SampleSpan()});
  rapidjson::Document d;
  d.Parse(body.data(), body.size());
  ASSERT_FALSE(d.HasParseError()) << body;
  const auto& span = d["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
  EXPECT_STREQ(span["traceId"].GetString(), "0102030405060708090a0b0c0d0e0f10");
  EXPECT_STREQ(span["spanId"].GetString(), "1112131415161718");
  EXPECT_STREQ(span["parentSpanId"].GetString(), "2122232425262728");
  EXPECT_EQ(span["kind"].GetInt(), 2);
  EXPECT_STREQ(span["startTimeUnixNano"].GetString(), "1700000000000000001");
  EXPECT_STREQ(span["attributes"][0]["value"]["stringValue"].GetString(), "mlp");
  EXPECT_STREQ(span["attributes"][1]["value"]["intValue"].GetString(), "-3");
  EXPECT_EQ(span["attributes"][2]["value"]["doubleValue"].GetDouble(), 0.25);
  EXPECT_TRUE(span["attributes"][3]["value"]["boolValue"].GetBool());
  EXPECT_STREQ(span["events"][0]["name"].GetString(), "COMPUTE_START");
  EXPECT_EQ(span["status"]["code"].GetInt(), 2);
  EXPECT_STREQ(span["status"]["message"].GetString(), "model \"mlp\" failed");
  EXPECT_STREQ(d["resourceSpans"][0]["resource"]["attributes"][0]["key"].GetString(), "service.name");
}

// ---- the exporter ----

struct Collected {
  std::mutex mu;
  std::vector<size_t> batches;    // spans in each
  std::vector<otlp::Span> spans;  // every span sent, decoded
  Status answer = Status::OK();
};

SpanExporter::Send Collect(std::shared_ptr<Collected> c) {
  return [c](std::string_view spans, size_t count) {
    std::lock_guard<std::mutex> g(c->mu);
    c->batches.push_back(count);
    otlp::ExportTraceServiceRequest req;
    EXPECT_TRUE(req.ParseFromString(WrapOtlpProtobuf(OtlpResource(), spans)));
    EXPECT_EQ(req.resource_spans(0).scope_spans(0).spans_size(), static_cast<int>(count));
    for (const auto& s : req.resource_spans(0).scope_spans(0).spans()) c->spans.push_back(s);
    return c->answer;
  };
}

// A span named `name`, encoded as a request's trace buffer does.
std::string Named(std::string name) {
  SpanRecord s;
  s.name = std::move(name);
  std::string out;
  AppendOtlpProtobufSpan(&out, s);
  return out;
}

TEST(SpanExporter, SendsFullBatchesAtOnceAndTheRestOnTheSchedule) {
  FakeClock clock;
  auto c = std::make_shared<Collected>();
  SpanExporter::Options o;
  o.max_queue_size = 100;
  o.max_export_batch_size = 4;
  o.schedule_delay = std::chrono::seconds(5);
  SpanExporter e(o, Collect(c), &clock);
  for (int i = 0; i < 6; ++i) e.Add(Named("s"), 1);
  // The thread sends the full batch without the clock moving; the 2 left wait for the schedule.
  clock.AwaitWaitCalls(1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    {
      std::lock_guard<std::mutex> g(c->mu);
      if (!c->batches.empty()) break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::yield();
  }
  {
    std::lock_guard<std::mutex> g(c->mu);
    EXPECT_EQ(c->batches, std::vector<size_t>{4});
  }
  clock.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(e.Flush(std::chrono::seconds(10)));
  {
    std::lock_guard<std::mutex> g(c->mu);
    EXPECT_EQ(c->batches, (std::vector<size_t>{4, 2}));
  }
  EXPECT_EQ(e.counters().exported, 6u);
  EXPECT_EQ(e.counters().sends, 2u);
}

TEST(SpanExporter, DropsAndCountsWhenTheQueueIsFullOrTheCollectorFails) {
  FakeClock clock;
  auto c = std::make_shared<Collected>();
  c->answer = Status::Unavailable("collector gone");
  SpanExporter::Options o;
  o.max_queue_size = 3;
  o.max_export_batch_size = 3;
  o.schedule_delay = std::chrono::hours(1);
  // A sender that blocks until released: the queue fills behind it.
  std::mutex gate;
  gate.lock();
  auto send = [&gate, c](std::string_view, size_t count) {
    std::lock_guard<std::mutex> g(gate);
    std::lock_guard<std::mutex> g2(c->mu);
    c->batches.push_back(count);
    return c->answer;
  };
  SpanExporter e(o, send, &clock);
  for (int i = 0; i < 3; ++i) e.Add(Named("a"), 1);  // a full batch: taken by the thread, which blocks in send
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // Once the thread took the batch the queue is empty again: fill it, and one more is dropped.
  int added = 0;
  while (e.counters().dropped_queue_full == 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    e.Add(Named("b"), 1);
    ++added;
  }
  gate.unlock();
  ASSERT_TRUE(e.Flush(std::chrono::seconds(10)));
  const auto counters = e.counters();
  EXPECT_EQ(counters.exported, 0u);
  EXPECT_EQ(counters.send_failures, counters.sends);
  EXPECT_EQ(counters.dropped_send_failed + counters.dropped_queue_full, static_cast<uint64_t>(3 + added));
  EXPECT_GE(counters.dropped_queue_full, 1u);
}

TEST(SpanExporter, StopSendsWhatIsQueued) {
  FakeClock clock;
  auto c = std::make_shared<Collected>();
  SpanExporter::Options o;
  o.max_export_batch_size = 10;
  o.schedule_delay = std::chrono::hours(1);
  auto e = std::make_unique<SpanExporter>(o, Collect(c), &clock);
  for (int i = 0; i < 25; ++i) e->Add(Named("s"), 1);
  e->Stop();
  e->Add(Named("late"), 1);  // after the stop: dropped, counted
  EXPECT_EQ(e->counters().exported, 25u);
  EXPECT_EQ(e->counters().dropped_queue_full, 1u);
  e.reset();
  std::lock_guard<std::mutex> g(c->mu);
  size_t total = 0;
  for (size_t b : c->batches) {
    EXPECT_LE(b, 10u);
    total += b;
  }
  EXPECT_EQ(total, 25u);
}

// ---- sampling ----

std::shared_ptr<TraceService> Service(const std::vector<std::string>& settings, FakeClock* clock,
                                      std::shared_ptr<Collected> c) {
  auto config = ParseTraceConfig(settings);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return TraceService::CreateWithSender(*config, Collect(std::move(c)), clock);
}

TEST(TraceService, TracesOneRequestInRateUpToCount) {
  FakeClock clock;
  auto c = std::make_shared<Collected>();
  auto t = Service({"mode=opentelemetry", "rate=3", "count=2"}, &clock, c);
  std::vector<bool> traced;
  for (int i = 0; i < 12; ++i) traced.push_back(t->StartRequest(t->Decide("", ""), "InferRequest", 1).active());
  EXPECT_EQ(traced,
            (std::vector<bool>{true, false, false, true, false, false, false, false, false, false, false, false}));
  EXPECT_EQ(t->counters().traces_by_rate, 2u);
}

TEST(TraceService, FollowsTheCallersDecision) {
  FakeClock clock;
  auto c = std::make_shared<Collected>();
  auto t = Service({"mode=opentelemetry", "rate=0"}, &clock, c);
  EXPECT_FALSE(t->StartRequest(t->Decide("", ""), "InferRequest", 1).active());  // rate 0: nothing of its own
  Span s =
      t->StartRequest(t->Decide("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "k=v"), "InferRequest", 1);
  ASSERT_TRUE(s.active());
  EXPECT_EQ(HexTraceId(s.trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_FALSE(
      t->StartRequest(t->Decide("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ""), "r", 1).active());
  EXPECT_FALSE(t->StartRequest(t->Decide("garbage", ""), "r", 1).active());
  EXPECT_EQ(t->counters().traces_propagated, 1u);
  EXPECT_EQ(t->counters().invalid_traceparent, 1u);
  // The span records its parent and the tracestate, and reaches the exporter when it ends.
  auto child = s.AsParent();
  Span compute(child, "compute", SpanKind::kInternal, 5);
  compute.End(9);
  s.End(10, Status::Internal("boom"));
  s.End(11);  // once only
  // The request's spans reach the exporter together, once nothing holds its context any more.
  ASSERT_TRUE(t->Flush(std::chrono::seconds(10)));
  EXPECT_EQ(t->counters().spans_recorded, 0u);
  child.reset();
  ASSERT_TRUE(t->Flush(std::chrono::seconds(10)));
  EXPECT_EQ(t->counters().spans_recorded, 2u);
  EXPECT_EQ(t->counters().exporter.exported, 2u);
  std::lock_guard<std::mutex> g(c->mu);
  EXPECT_EQ(c->batches, std::vector<size_t>{2});
  ASSERT_EQ(c->spans.size(), 2u);
  const otlp::Span& sent_compute = c->spans[0];
  const otlp::Span& sent_root = c->spans[1];
  EXPECT_EQ(sent_compute.name(), "compute");
  EXPECT_EQ(sent_root.name(), "InferRequest");
  EXPECT_EQ(sent_root.parent_span_id(), std::string("\x00\xf0\x67\xaa\x0b\xa9\x02\xb7", 8));
  EXPECT_EQ(sent_root.trace_state(), "k=v");
  EXPECT_EQ(sent_compute.parent_span_id(), sent_root.span_id());
  EXPECT_EQ(sent_compute.trace_id(), sent_root.trace_id());
  EXPECT_EQ(sent_root.status().code(), otlp::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(sent_root.status().message(), "boom");
}

TEST(TraceService, ARequestWithManyContextsKeepsThemAllAndItsSpansTogether) {
  FakeClock clock;
  auto c = std::make_shared<Collected>();
  auto t = Service({"mode=opentelemetry", "rate=1", "opentelemetry,protocol=http/protobuf"}, &clock, c);
  {
    Span root = t->StartRequest(t->Decide("", ""), "InferRequest", 1);
    ASSERT_TRUE(root.active());
    // A chain deeper than the buffer's contexts held in place (an ensemble's steps): the rest are allocated.
    std::vector<Span> chain;
    std::shared_ptr<const TraceParent> parent = root.AsParent();
    for (int i = 0; i < 10; ++i) {
      chain.emplace_back(parent, "step", SpanKind::kInternal, 2 + i);
      parent = chain.back().AsParent();
      ASSERT_NE(parent, nullptr);
      EXPECT_EQ(parent->trace_id, root.trace_id());
      EXPECT_EQ(parent->span_id, chain.back().id());
    }
    // Attributes beyond the limit are dropped and counted, a key set again is replaced.
    for (size_t i = 0; i < SpanRecord::kMaxAttributes + 2; ++i) root.SetAttribute("k", int64_t(i));
    static const char* kKeys[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k2", "l", "m", "n"};
    for (const char* k : kKeys) root.SetAttribute(k, true);
    while (!chain.empty()) {
      chain.back().End(50);
      chain.pop_back();
    }
    root.End(60);
    ASSERT_TRUE(t->Flush(std::chrono::seconds(10)));
    EXPECT_EQ(t->counters().spans_recorded, 0u);  // `parent` still holds the request's buffer
  }
  ASSERT_TRUE(t->Flush(std::chrono::seconds(10)));
  std::lock_guard<std::mutex> g(c->mu);
  EXPECT_EQ(c->batches, std::vector<size_t>{11});
  ASSERT_EQ(c->spans.size(), 11u);
  const otlp::Span& root = c->spans.back();
  EXPECT_EQ(root.name(), "InferRequest");
  EXPECT_EQ(root.attributes_size(), static_cast<int>(SpanRecord::kMaxAttributes));
  EXPECT_EQ(root.attributes(0).value().int_value(), static_cast<int64_t>(SpanRecord::kMaxAttributes + 1));
  EXPECT_EQ(root.dropped_attributes_count(), 14u - (SpanRecord::kMaxAttributes - 1));
  // Each step is the child of the one before it, the first the root's.
  std::string parent = root.span_id();
  std::vector<const otlp::Span*> by_start;
  for (size_t i = 0; i < 10; ++i) by_start.push_back(&c->spans[9 - i]);  // the outermost step ended last
  for (const otlp::Span* step : by_start) {
    EXPECT_EQ(step->parent_span_id(), parent);
    EXPECT_EQ(step->trace_id(), root.trace_id());
    parent = step->span_id();
  }
}

TEST(TraceService, ExportsEndedSpansInTheOrderTheyEndedAndNeverOneThatDidNotEnd) {
  FakeClock clock;
  auto c = std::make_shared<Collected>();
  auto t = Service({"mode=opentelemetry", "rate=1"}, &clock, c);
  {
    Span root = t->StartRequest(t->Decide("", ""), "InferRequest", 1);
    std::shared_ptr<const TraceParent> ctx = root.AsParent();
    { Span lost(ctx, "lost", SpanKind::kInternal, 2); }  // goes without End: not recorded
    Span a(ctx, "moved", SpanKind::kInternal, 3);
    Span b = std::move(a);  // the record moves with the span
    EXPECT_FALSE(a.active());
    Span d(ctx, "replaced", SpanKind::kInternal, 4);
    d = Span(ctx, "kept", SpanKind::kInternal, 5);  // the span it replaces goes unended
    // More spans than the buffer holds in place (the rest on the heap), one of them ending, the others not.
    std::vector<Span> many;
    for (int i = 0; i < 8; ++i) many.emplace_back(ctx, "many", SpanKind::kInternal, 6);
    many[6].SetAttribute("i", int64_t{6});
    many[6].End(7);
    d.End(8);
    b.End(9);
    a.End(10);  // inactive: nothing
    b.End(11);  // once only
    root.End(12);
  }
  ASSERT_TRUE(t->Flush(std::chrono::seconds(10)));
  std::lock_guard<std::mutex> g(c->mu);
  std::vector<std::string> names;
  for (const otlp::Span& s : c->spans) names.push_back(s.name());
  EXPECT_EQ(names, (std::vector<std::string>{"many", "kept", "moved", "InferRequest"}));
  ASSERT_EQ(c->spans.size(), 4u);
  EXPECT_EQ(c->spans[0].attributes(0).value().int_value(), 6);
  EXPECT_EQ(c->spans[2].end_time_unix_nano(), 9u);
  EXPECT_EQ(t->counters().spans_recorded, 4u);
}

TEST(RequestObserver, LetsAnUntracedRequestPassUnobservedUnlessALogWantsIt) {
  FakeClock clock;
  auto c = std::make_shared<Collected>();
  auto t = Service({"mode=opentelemetry", "rate=2"}, &clock, c);
  const RequestObserver tracing_only(t, nullptr);
  // One request in two is traced; the other is not observed at all (no span, no state, no log line).
  auto first = tracing_only.Decide(/*inference=*/true, "", "");
  auto second = tracing_only.Decide(/*inference=*/true, "", "");
  EXPECT_TRUE(first.traced());
  EXPECT_TRUE(tracing_only.Observes(first));
  EXPECT_FALSE(second.traced());
  EXPECT_FALSE(tracing_only.Observes(second));
  // Routes that run no model are never traced (and use none of the rate).
  EXPECT_FALSE(tracing_only.Decide(/*inference=*/false, "", "").traced());
  EXPECT_TRUE(tracing_only.Decide(/*inference=*/true, "", "").traced());
  // A caller's sampled context is followed whatever the rate.
  auto remote = tracing_only.Decide(true, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "");
  ASSERT_TRUE(remote.traced());
  ObservedRequest r;
  tracing_only.Start(r, std::move(remote), std::chrono::steady_clock::time_point(std::chrono::seconds(5)));
  ASSERT_TRUE(r.root.active());
  EXPECT_EQ(HexTraceId(r.root.trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(r.traceparent.substr(0, 36), "00-4bf92f3577b34da6a3ce929d0e0e4736-");
  ASSERT_NE(r.context, nullptr);
  // With an access log every request is observed (its line is decided at the end).
  testing::TempDir dir;
  AccessLogOptions o;
  o.path = dir.path() + "/access.log";
  auto log = AccessLog::Open(o);
  ASSERT_TRUE(log.ok()) << log.status().message();
  const RequestObserver logging(nullptr, std::shared_ptr<AccessLog>(std::move(*log)));
  auto untraced = logging.Decide(true, "", "");
  EXPECT_FALSE(untraced.traced());
  EXPECT_TRUE(logging.Observes(untraced));
}

TEST(BoundedList, HoldsUpToItsLimitAndCopiesAndMovesWhatItHolds) {
  BoundedList<std::string, 3> a;
  EXPECT_TRUE(a.empty());
  const std::string long_text(100, 'x');  // beyond the inline buffer: a real allocation to copy and free
  EXPECT_TRUE(a.push_back("one"));
  EXPECT_TRUE(a.push_back(long_text));
  std::string* third = a.add();
  ASSERT_NE(third, nullptr);
  EXPECT_TRUE(third->empty());  // a new slot is default-constructed
  *third = "three";
  EXPECT_FALSE(a.push_back("four"));  // full: refused
  EXPECT_EQ(a.add(), nullptr);
  ASSERT_EQ(a.size(), 3u);
  BoundedList<std::string, 3> copy(a);
  EXPECT_EQ(std::vector<std::string>(copy.begin(), copy.end()), (std::vector<std::string>{"one", long_text, "three"}));
  BoundedList<std::string, 3> moved(std::move(copy));
  ASSERT_EQ(moved.size(), 3u);
  EXPECT_EQ(moved[1], long_text);
  BoundedList<std::string, 3> assigned;
  assigned.push_back("old");
  assigned = a;
  EXPECT_EQ(assigned.size(), 3u);
  EXPECT_EQ(assigned[0], "one");
  assigned = std::move(moved);
  EXPECT_EQ(assigned[2], "three");
  assigned.clear();
  EXPECT_TRUE(assigned.empty());
  EXPECT_TRUE(assigned.push_back("again"));
  EXPECT_EQ(a[1], long_text);  // the original is untouched by its copies
}

// Counts its live instances; copying the one marked `fails` throws (an allocation that failed, say).
struct Counted {
  static inline int live = 0;
  bool fails = false;
  Counted() { ++live; }
  explicit Counted(bool f) : fails(f) { ++live; }
  Counted(const Counted& o) : fails(o.fails) {
    if (fails) throw std::runtime_error("copy failed");
    ++live;
  }
  Counted& operator=(const Counted&) = default;
  ~Counted() { --live; }
};

TEST(BoundedList, ACopyThatThrowsLeavesNothingBuiltBehind) {
  {
    BoundedList<Counted, 4> a;
    a.add();
    a.add();
    a.add()->fails = true;
    ASSERT_EQ(Counted::live, 3);
    // The third copy throws: the two made before it are destroyed, and nothing more (no slot counted unbuilt).
    using List = BoundedList<Counted, 4>;
    EXPECT_THROW(List{a}, std::runtime_error);
    EXPECT_EQ(Counted::live, 3);
    BoundedList<Counted, 4> b;
    b.add();
    EXPECT_THROW(b = a, std::runtime_error);
    EXPECT_EQ(b.size(), 2u);  // assignment: what was copied stays, counted
    EXPECT_EQ(Counted::live, 5);
  }
  EXPECT_EQ(Counted::live, 0);
}

TEST(Span, InactiveSpansDoNothing) {
  Span none;
  none.SetAttribute("k", int64_t{1});
  none.AddEvent("e", 1);
  none.End(2);
  EXPECT_FALSE(none.active());
  EXPECT_EQ(none.AsParent(), nullptr);
  Span child(std::shared_ptr<const TraceParent>(), "x", SpanKind::kInternal, 1);
  EXPECT_FALSE(child.active());
}

// ---- the collector client ----

TEST(OtlpHttpClient, ACollectorThatIsNotThereIsUnavailableAtOnce) {
  CollectorAddress a;
  a.host = "127.0.0.1";
  a.port = static_cast<uint16_t>(testing::FreePort());
  OtlpHttpClient client(a);
  const Status st = client.Post("application/json", "{}", std::chrono::seconds(5));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("cannot connect"), std::string::npos) << st.message();
}

// ---- the access log ----

TEST(AccessLog, LinesAreOneJsonObjectEach) {
  AccessRecord r;
  r.unix_ns = 1'700'000'000'123'456'789;
  r.client = "127.0.0.1:5000";
  r.protocol = "http";
  r.method = "POST";
  r.target = "/v2/models/m\"x\n/infer";
  r.model = "m\"x\n";
  r.version = "1";
  r.status = 200;
  r.latency_ms = 1.5;
  r.bytes_in = 10;
  r.bytes_out = 20;
  r.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  const std::string line = FormatAccessRecord(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  rapidjson::Document d;
  d.Parse(line.data(), line.size());
  ASSERT_FALSE(d.HasParseError()) << line;
  EXPECT_STREQ(d["time"].GetString(), "2023-11-14T22:13:20.123456Z");
  EXPECT_STREQ(d["model"].GetString(), "m\"x\n");
  EXPECT_EQ(d["status"].GetInt(), 200);
  EXPECT_EQ(d["latency_ms"].GetDouble(), 1.5);
  EXPECT_EQ(d["bytes_out"].GetInt(), 20);
  EXPECT_STREQ(d["trace_id"].GetString(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_FALSE(d.HasMember("request_id"));
}

TEST(AccessLog, WritesSampledSuccessesAndEveryFailure) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/access.log";
  AccessLogOptions o;
  o.path = path;
  o.sample_rate = 0.25;
  auto log = AccessLog::Open(o);
  ASSERT_TRUE(log.ok()) << log.status().message();
  int wanted_ok = 0;
  for (int i = 0; i < 8; ++i) {
    if ((*log)->Wanted(false)) {
      ++wanted_ok;
      AccessRecord r;
      r.status = 200;
      (*log)->Write(r);
    }
  }
  ASSERT_TRUE((*log)->Wanted(true));
  AccessRecord failed;
  failed.status = 503;
  failed.failed = true;
  (*log)->Write(failed);
  ASSERT_TRUE((*log)->Flush(std::chrono::seconds(10)));
  EXPECT_EQ(wanted_ok, 2);
  std::ifstream in(path);
  std::string line;
  int lines = 0, errors = 0;
  while (std::getline(in, line)) {
    ++lines;
    if (line.find("\"status\":503") != std::string::npos) ++errors;
  }
  EXPECT_EQ(lines, 3);
  EXPECT_EQ(errors, 1);
  EXPECT_EQ((*log)->written(), 3u);
  AccessLogOptions bad;
  bad.path = dir.path() + "/no/such/dir/log";
  EXPECT_EQ(AccessLog::Open(bad).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace inferd::tracing
