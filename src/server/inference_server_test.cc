#include "server/inference_server.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>

#include "backends/identity/identity_backend.h"
#include "server/server_options.h"
#include "testing/gated_backend.h"
#include "testing/parts_scheduler.h"
#include "testing/test_requests.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;
using testing::F32;

class InferenceServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("inferd_server_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    Write("echo/config.pbtxt", R"(backend: "identity" max_batch_size: 8
      input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ] output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
      dynamic_batching { })");
    fs::create_directories(root_ / "echo/1");
    fs::create_directories(root_ / "echo/2");
    Write("broken/config.pbtxt", "backend: \"identity\" max_batch_size: 2 not_a_field: 1");
    fs::create_directories(root_ / "broken/1");
    ASSERT_TRUE(backends_.Register(MakeIdentityBackend()).ok());
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(root_);
  }

  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }

  void Start(ModelControlMode mode = ModelControlMode::kNone, std::vector<std::string> load = {},
             const SchedulerFactory* schedulers = nullptr, size_t cache_bytes = 0,
             std::shared_ptr<const tracing::RequestObserver> observer = nullptr) {
    ServerOptions o;
    o.response_cache_bytes = cache_bytes;
    o.observer = std::move(observer);
    o.schedulers = schedulers;
    o.model_repository = root_.string();
    o.control_mode = mode;
    o.startup_models = std::move(load);
    server_ = std::make_unique<InferenceServer>(o, &backends_, &clock_);
    ASSERT_TRUE(server_->Start().ok());
  }

  Result<InferResponse> Infer(std::unique_ptr<InferRequest> r) {
    std::promise<Result<InferResponse>> p;
    auto f = p.get_future();
    server_->InferAsync(std::move(r), [&p](Result<InferResponse> res) { p.set_value(std::move(res)); });
    return f.get();
  }

  static std::unique_ptr<InferRequest> Req(std::string model, Tensor t, std::string version = "") {
    auto r = std::make_unique<InferRequest>();
    r->model_name = std::move(model);
    r->model_version = std::move(version);
    r->inputs.push_back(std::move(t));
    return r;
  }

  fs::path root_;
  BackendRegistry backends_;
  SteadyClock clock_;
  std::unique_ptr<InferenceServer> server_;
};

TEST_F(InferenceServerTest, ServesGoodModelsAndReportsBrokenOnes) {
  Start();
  EXPECT_TRUE(server_->IsReady());
  auto md = server_->GetModelMetadata("echo", "");
  ASSERT_TRUE(md.ok());
  EXPECT_EQ(md->versions, (std::vector<std::string>{"2"}));  // latest 1 by default
  EXPECT_EQ(md->inputs[0].shape, (Shape{-1, 2}));
  auto index = server_->admin().RepositoryIndex(false);
  ASSERT_TRUE(index.ok());
  bool saw_broken = false;
  for (const auto& e : *index) {
    if (e.name != "broken") continue;
    saw_broken = true;
    EXPECT_EQ(e.state, "UNAVAILABLE");
    EXPECT_NE(e.reason.find("config.pbtxt"), std::string::npos) << e.reason;
    EXPECT_NE(e.reason.find("not_a_field"), std::string::npos) << e.reason;
  }
  EXPECT_TRUE(saw_broken);
  EXPECT_EQ(server_->GetModelMetadata("broken", "").status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(server_->GetModelMetadata("nope", "").status().code(), StatusCode::kNotFound);
}

TEST_F(InferenceServerTest, InfersAndValidates) {
  Start();
  auto ok = Infer(Req("echo", F32("x", {3, 2}, {1, 2, 3, 4, 5, 6})));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->model_version, "2");
  EXPECT_EQ(testing::ToFloats(ok->outputs[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  struct Case {
    std::unique_ptr<InferRequest> req;
    StatusCode code;
    const char* text;
  };
  std::vector<Case> cases;
  cases.push_back({Req("echo", F32("x", {1, 3}, {1})), StatusCode::kInvalidArgument, "unexpected shape"});
  cases.push_back({Req("echo", F32("z", {1, 2}, {1})), StatusCode::kInvalidArgument, "unexpected inference input"});
  cases.push_back({Req("echo", F32("x", {9, 2}, {1})), StatusCode::kInvalidArgument, "batch-size"});
  cases.push_back({Req("echo", F32("x", {1, 2}, {1}), "7"), StatusCode::kNotFound, "version 7"});
  cases.push_back({Req("echo", F32("x", {1, 2}, {1}), "abc"), StatusCode::kInvalidArgument, "invalid model version"});
  cases.push_back({Req("nope", F32("x", {1, 2}, {1})), StatusCode::kNotFound, "unknown model"});
  auto wrong_type = Req("echo", F32("x", {1, 2}, {1}));
  wrong_type->inputs[0].dtype = DataType::kInt32;
  cases.push_back({std::move(wrong_type), StatusCode::kInvalidArgument, "data-type"});
  auto missing = Req("echo", F32("x", {1, 2}, {1}));
  missing->inputs.clear();
  cases.push_back({std::move(missing), StatusCode::kInvalidArgument, "missing input"});
  auto unknown_out = Req("echo", F32("x", {1, 2}, {1}));
  unknown_out->outputs.push_back({"nope"});
  cases.push_back({std::move(unknown_out), StatusCode::kInvalidArgument, "unexpected inference output"});
  auto bad_prio = Req("echo", F32("x", {1, 2}, {1}));
  bad_prio->parameters["priority"] = std::string("high");
  cases.push_back({std::move(bad_prio), StatusCode::kInvalidArgument, "priority"});
  auto openai = Req("echo", F32("x", {1, 2}, {1}));  // through a generative API (OpenAI's routes)
  openai->generative_api = true;
  cases.push_back({std::move(openai), StatusCode::kInvalidArgument,
                   "The model `echo` is not a generative model (platform identity)"});
  for (auto& c : cases) {
    auto r = Infer(std::move(c.req));
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), c.code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.text), std::string::npos) << r.status().message();
  }
  auto stats = server_->GetStatistics("echo", "2");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].success.count, 1u);
  // Every case that reached the model (all but the unknown model and the
  // two bad versions) counts as a failure of version 2.
  EXPECT_EQ((*stats)[0].fail.count, 8u);
}

TEST_F(InferenceServerTest, ExplicitModeLoadsAndUnloadsOnRequest) {
  Start(ModelControlMode::kExplicit, {});
  EXPECT_EQ(server_->GetModelMetadata("echo", "").status().code(), StatusCode::kUnavailable);
  ASSERT_TRUE(server_->admin().LoadModel("echo").ok());
  EXPECT_TRUE(Infer(Req("echo", F32("x", {1, 2}, {1}))).ok());
  ASSERT_TRUE(server_->admin().UnloadModel("echo").ok());
  EXPECT_EQ(Infer(Req("echo", F32("x", {1, 2}, {1}))).status().code(), StatusCode::kUnavailable);
  // A load with a JSON config override.
  ASSERT_TRUE(server_->admin()
                  .LoadModel("echo", std::string(R"({"backend":"identity","max_batch_size":0,
      "input":[{"name":"x","data_type":"TYPE_FP32","dims":[3]}],"output":[{"name":"y","data_type":"TYPE_FP32","dims":[3]}]})"))
                  .ok());
  EXPECT_TRUE(Infer(Req("echo", F32("x", {3}, {1}))).ok());
  EXPECT_FALSE(server_->admin().LoadModel("broken").ok());
  EXPECT_EQ(server_->admin().UnloadModel("ghost").code(), StatusCode::kNotFound);
}

TEST_F(InferenceServerTest, NoneModeRefusesLoadCalls) {
  Start();
  EXPECT_EQ(server_->admin().LoadModel("echo").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(server_->admin().UnloadModel("echo").code(), StatusCode::kFailedPrecondition);
}

TEST_F(InferenceServerTest, MetricsExposeTritonNamesAndHistograms) {
  Start();
  ASSERT_TRUE(Infer(Req("echo", F32("x", {2, 2}, {1}))).ok());
  PrometheusWriter w;
  server_->WriteMetrics(w);
  const std::string& t = w.text();
  EXPECT_NE(t.find("nv_inference_request_success{model=\"echo\",version=\"2\"} 1"), std::string::npos) << t;
  EXPECT_NE(t.find("nv_inference_count{model=\"echo\",version=\"2\"} 2"), std::string::npos);
  EXPECT_NE(t.find("inferd_batch_size_bucket{model=\"echo\",version=\"2\",le=\"2\"} 1"), std::string::npos);
  EXPECT_NE(t.find("nv_inference_request_failure{model=\"echo\",version=\"2\",reason=\"REJECTED\"} 0"),
            std::string::npos);
  EXPECT_NE(t.find("process_resident_memory_bytes"), std::string::npos);
}

TEST_F(InferenceServerTest, PartialResponsesReachTheSinkBeforeTheFinalAnswer) {
  const SchedulerFactory parts = testing::PartsSchedulers();
  Start(ModelControlMode::kNone, {}, &parts);
  std::vector<std::string> events;
  ResponseSink sink;
  sink.partial = [&](InferResponse r) {
    events.push_back("part " + std::to_string(static_cast<int>(testing::ToFloats(r.outputs[0])[0])));
    return true;
  };
  sink.final = [&](Result<InferResponse> r) { events.push_back(r.ok() ? "final" : r.status().message()); };
  server_->InferAsync(Req("echo", F32("x", {3, 2}, {1})), std::move(sink));
  EXPECT_EQ(events, (std::vector<std::string>{"part 0", "part 1", "part 2", "final"}));
  // A client that takes only one answer gets the model's refusal.
  auto unary = Infer(Req("echo", F32("x", {1, 2}, {1})));
  EXPECT_EQ(unary.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unary.status().message(), "this model answers in parts: use a streaming API");
}

TEST_F(InferenceServerTest, AdmitRefusesBeforeDecodingWhenTheQueueIsFull) {
  testing::Gate gate;
  gate.Close();
  ASSERT_TRUE(backends_.Register(std::make_unique<testing::GatedBackend>(&gate)).ok());
  Write("held/config.pbtxt", R"(backend: "gated" max_batch_size: 1
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ] output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
    dynamic_batching { default_queue_policy { max_queue_size: 1 } })");
  fs::create_directories(root_ / "held/1");
  Start();
  std::vector<std::future<Result<InferResponse>>> answers;
  auto send = [&] {
    auto p = std::make_shared<std::promise<Result<InferResponse>>>();
    answers.push_back(p->get_future());
    server_->InferAsync(Req("held", F32("x", {1, 2}, {1})),
                        [p](Result<InferResponse> r) { p->set_value(std::move(r)); });
  };
  send();
  ASSERT_TRUE(gate.AwaitExecutionsStarted(1));  // running, held
  send();                                       // queued: the queue is full
  EXPECT_TRUE(server_->Admit("held", "").ok());
  send();  // refused by the queue, which now says so without locks
  ASSERT_EQ(answers.back().wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_EQ(answers.back().get().status().code(), StatusCode::kUnavailable);
  answers.pop_back();
  const Status admit = server_->Admit("held", "");
  EXPECT_EQ(admit.code(), StatusCode::kUnavailable);
  EXPECT_EQ(admit.message(), "model 'held' queue is full (max_queue_size 1)");
  EXPECT_TRUE(server_->Admit("echo", "").ok());   // other models are unaffected
  EXPECT_TRUE(server_->Admit("ghost", "").ok());  // unknown: InferAsync answers that
  auto stats = server_->GetStatistics("held", "1");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].fail.count, 2u);  // the queue's refusal and Admit's
  gate.Open();
  for (auto& a : answers) {
    ASSERT_EQ(a.wait_for(std::chrono::seconds(20)), std::future_status::ready);
    EXPECT_TRUE(a.get().ok());
  }
}

// Under a traffic split the version that serves is known only once the request is routed: Admit (before the
// request is read) leaves it to the pipeline's admission stage, which checks the version the request is pinned to.
TEST_F(InferenceServerTest, AdmissionUnderATrafficSplitChecksTheVersionThatServes) {
  testing::Gate gate;
  gate.Close();
  ASSERT_TRUE(backends_.Register(std::make_unique<testing::GatedBackend>(&gate)).ok());
  Write("held/config.pbtxt", R"(backend: "gated" max_batch_size: 1 version_policy: { all { } }
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ] output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
    dynamic_batching { default_queue_policy { max_queue_size: 1 } })");
  fs::create_directories(root_ / "held/1");
  fs::create_directories(root_ / "held/2");
  Start();
  ASSERT_TRUE(server_->admin().SetTraffic("held", R"({"split": {"1": 100}})").ok());
  std::vector<std::future<Result<InferResponse>>> answers;
  auto send = [&](std::string version) {
    auto p = std::make_shared<std::promise<Result<InferResponse>>>();
    answers.push_back(p->get_future());
    server_->InferAsync(Req("held", F32("x", {1, 2}, {1}), std::move(version)),
                        [p](Result<InferResponse> r) { p->set_value(std::move(r)); });
  };
  // Version 2, the default version, runs one request (held), queues one and refuses the next: its queue is full.
  send("2");
  ASSERT_TRUE(gate.AwaitExecutionsStarted(1));
  send("2");
  send("2");
  ASSERT_EQ(answers.back().wait_for(std::chrono::seconds(20)), std::future_status::ready);
  EXPECT_EQ(answers.back().get().status().code(), StatusCode::kUnavailable);
  answers.pop_back();
  EXPECT_EQ(server_->Admit("held", "2").code(), StatusCode::kUnavailable);
  // A request that names no version goes to version 1 (the split): admitted, and served there.
  EXPECT_TRUE(server_->Admit("held", "").ok());
  send("");
  gate.Open();
  for (size_t i = 0; i < answers.size(); ++i) {
    ASSERT_EQ(answers[i].wait_for(std::chrono::seconds(20)), std::future_status::ready);
    Result<InferResponse> r = answers[i].get();
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->model_version, i + 1 == answers.size() ? "1" : "2");
  }
  auto stats = server_->GetStatistics("held", "1");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].fail.count, 0u);  // nothing counted against the version that had room
}

// A body that decodes by the model's inputs (TF Serving's :predict, Triton's /generate) is decoded once, by the
// version the request is pinned to (under a split: not the default one), before any later stage reads it.
TEST_F(InferenceServerTest, ABodyDecodesByTheInputsOfTheVersionThatServes) {
  Write("split/config.pbtxt", R"(backend: "identity" max_batch_size: 8 version_policy: { all { } }
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ] output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ])");
  fs::create_directories(root_ / "split/1");
  fs::create_directories(root_ / "split/2");
  Start();
  ASSERT_TRUE(server_->admin().SetTraffic("split", R"({"split": {"1": 100}})").ok());
  std::vector<std::string> versions;
  std::vector<TensorMetadata> declared;
  auto req = std::make_unique<InferRequest>();
  req->model_name = "split";
  req->decode = [&](const std::vector<TensorMetadata>& inputs, InferRequest& r) {
    versions.push_back(r.model_version);  // the pinned version
    declared = inputs;
    r.inputs.push_back(F32("x", {1, 2}, {1}));
    return Status::OK();
  };
  Result<InferResponse> r = Infer(std::move(req));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->model_version, "1");
  EXPECT_EQ(versions, (std::vector<std::string>{"1"}));  // once, on version 1
  ASSERT_EQ(declared.size(), 1u);
  EXPECT_EQ(declared[0].name, "x");
  EXPECT_EQ(declared[0].dtype, DataType::kFp32);
  EXPECT_EQ(declared[0].shape, (Shape{-1, 2}));  // as clients send it: the batch dimension first

  // A body that does not decode is a bad request, counted against the version that would have served it.
  auto bad = std::make_unique<InferRequest>();
  bad->model_name = "split";
  bad->decode = [](const std::vector<TensorMetadata>&, InferRequest&) {
    return Status::InvalidArgument("unknown input 'z'");
  };
  Result<InferResponse> b = Infer(std::move(bad));
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message(), "unknown input 'z'");
  auto stats = server_->GetStatistics("split", "1");
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].fail.count, 1u);
}

// Spans of traced requests, as the TraceService would get them.
class RecordingSink final : public SpanSink {
 public:
  void Record(SpanRecord&& span) override {
    std::lock_guard<std::mutex> g(mu_);
    spans_.push_back(std::move(span));
    cv_.notify_all();
  }
  std::vector<SpanRecord> spans() {
    std::lock_guard<std::mutex> g(mu_);
    return spans_;
  }
  // The spans once there are `n` (a request's spans may end just after its answer), or after 10 s.
  std::vector<SpanRecord> WaitFor(size_t n) {
    std::unique_lock<std::mutex> g(mu_);
    cv_.wait_for(g, std::chrono::seconds(10), [&] { return spans_.size() >= n; });
    return spans_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SpanRecord> spans_;
};

const SpanRecord* Find(const std::vector<SpanRecord>& spans, const std::string& name) {
  for (const auto& s : spans)
    if (s.name == name) return &s;
  return nullptr;
}

TEST_F(InferenceServerTest, ATracedRequestRecordsItsModelQueueComputeAndStageSpans) {
  Write("cached/config.pbtxt", R"(backend: "identity" max_batch_size: 8
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ] output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
    response_cache { enable: true })");
  fs::create_directories(root_ / "cached/1");
  // Tracing on (the trace stage in the pipeline); the spans go to the recording sink the requests carry.
  tracing::TraceConfig tc;
  tc.enabled = true;
  auto traces = tracing::TraceService::CreateWithSender(
      tc, [](std::string_view, size_t) { return Status::OK(); }, &clock_);
  Start(ModelControlMode::kNone, {}, nullptr, 1 << 20, std::make_shared<tracing::RequestObserver>(traces, nullptr));
  auto sink = std::make_shared<RecordingSink>();
  auto root = MakeTraceParent(sink, {1, 2}, 77);
  // Untraced: nothing recorded.
  ASSERT_TRUE(Infer(Req("echo", F32("x", {1, 2}, {1, 2}))).ok());
  EXPECT_TRUE(sink->spans().empty());

  auto traced = Req("echo", F32("x", {2, 2}, {1, 2, 3, 4}));
  traced->trace = root;
  traced->id = "req-1";
  ASSERT_TRUE(Infer(std::move(traced)).ok());
  auto spans = sink->WaitFor(3);
  ASSERT_EQ(spans.size(), 3u);
  const SpanRecord* model = Find(spans, "echo");
  const SpanRecord* queue = Find(spans, "queue");
  const SpanRecord* compute = Find(spans, "compute");
  ASSERT_TRUE(model && queue && compute);
  EXPECT_EQ(model->parent_span_id, 77u);
  EXPECT_EQ(model->trace_id, (TraceId{1, 2}));
  EXPECT_EQ(queue->parent_span_id, model->span_id);
  EXPECT_EQ(compute->parent_span_id, model->span_id);
  auto attr = [](const SpanRecord& s, const std::string& key) -> const SpanValue* {
    for (const auto& a : s.attributes)
      if (a.key == key) return &a.value;
    return nullptr;
  };
  ASSERT_NE(attr(*model, "triton.model_version"), nullptr);
  EXPECT_EQ(std::get<int64_t>(*attr(*model, "triton.model_version")), 2);
  EXPECT_EQ(std::get<std::string>(*attr(*model, "triton.request_id")), "req-1");
  EXPECT_EQ(std::get<int64_t>(*attr(*compute, "inferd.batch_size")), 2);
  ASSERT_EQ(model->events.size(), 2u);
  EXPECT_EQ(model->events[0].name, "REQUEST_START");
  EXPECT_EQ(compute->events.size(), 4u);
  EXPECT_LE(model->start_unix_ns, compute->start_unix_ns);
  EXPECT_LE(compute->end_unix_ns, model->end_unix_ns);
  EXPECT_EQ(model->status, SpanStatus::kUnset);

  // The cache stage: a miss goes on (a span), a hit answers in it (inferd.answered, no queue or compute).
  for (int i = 0; i < 2; ++i) {
    auto r = Req("cached", F32("x", {1, 2}, {5, 6}));
    r->trace = root;
    ASSERT_TRUE(Infer(std::move(r)).ok());
  }
  spans = sink->WaitFor(3u + 4u + 2u);
  std::vector<const SpanRecord*> cache;
  for (const auto& s : spans)
    if (s.name == "cache") cache.push_back(&s);
  ASSERT_EQ(cache.size(), 2u);
  EXPECT_EQ(attr(*cache[0], "inferd.answered"), nullptr);
  ASSERT_NE(attr(*cache[1], "inferd.answered"), nullptr);
  EXPECT_EQ(spans.size(), 3u + 4u + 2u);  // miss: model, cache, queue, compute; hit: model, cache

  // A failed request's model span is an error with the reason.
  auto bad = Req("echo", F32("x", {1, 3}, {1, 2, 3}));
  bad->trace = root;
  EXPECT_FALSE(Infer(std::move(bad)).ok());
  spans = sink->WaitFor(3u + 4u + 2u + 1u);
  ASSERT_EQ(spans.size(), 3u + 4u + 2u + 1u);
  EXPECT_EQ(spans.back().name, "echo");
  EXPECT_EQ(spans.back().status, SpanStatus::kError);
  EXPECT_NE(spans.back().status_message.find("shape"), std::string::npos);
}

TEST_F(InferenceServerTest, ShutdownRejectsNewRequests) {
  Start();
  server_->Shutdown();
  EXPECT_FALSE(server_->IsReady());
  EXPECT_EQ(Infer(Req("echo", F32("x", {1, 2}, {1}))).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace inferd
