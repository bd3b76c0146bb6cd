#include "scheduler/ensemble_scheduler.h"

#include <gtest/gtest.h>

#include <future>
#include <map>
#include <mutex>
#include <vector>

#include "testing/fake_clock.h"

namespace inferd {
namespace {

Tensor Floats(std::string name, std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::Copy(std::move(name), DataType::kFp32, {1, n},
                      std::as_bytes(std::span<const float>(v.data(), v.size())));
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.as<float>(), t.as<float>() + t.element_count());
}

TensorSpec T(std::string name, Shape dims) {
  TensorSpec t;
  t.name = std::move(name);
  t.dtype = DataType::kFp32;
  t.dims = std::move(dims);
  return t;
}

// Records submitted step requests; the test answers them when it wants.
class FakeSubmitter final : public RequestSubmitter {
 public:
  struct Call {
    std::unique_ptr<InferRequest> request;
    InferCallback callback;
  };
  void Submit(std::unique_ptr<InferRequest> request, InferCallback callback) override {
    std::lock_guard<std::mutex> g(mu_);
    calls_.push_back({std::move(request), std::move(callback)});
  }
  Result<ModelSpec> Describe(const std::string& model, const std::string&) override {
    auto it = models.find(model);
    if (it == models.end()) return Status::NotFound("model '" + model + "' is not in the repository");
    return it->second;
  }
  // The submitted calls not answered yet, by model name.
  std::vector<std::string> Pending() {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::string> out;
    for (const auto& c : calls_)
      if (c.callback) out.push_back(c.request->model_name);
    return out;
  }
  // Answers the first unanswered call to `model` with `f` of its input.
  void Answer(const std::string& model, const std::function<Result<InferResponse>(const InferRequest&)>& f) {
    InferCallback cb;
    Result<InferResponse> r = Status::Internal("no call");
    {
      std::lock_guard<std::mutex> g(mu_);
      for (auto& c : calls_) {
        if (!c.callback || c.request->model_name != model) continue;
        r = f(*c.request);
        cb = std::move(c.callback);
        c.callback = nullptr;
        break;
      }
    }
    ASSERT_TRUE(cb) << "no pending call to " << model;
    cb(std::move(r));
  }
  std::map<std::string, ModelSpec> models;

 private:
  std::mutex mu_;
  std::vector<Call> calls_;
};

// scale: y = 2x; mlp: y = [sum(x)]; the ensemble: raw -> scale -> scaled -> mlp -> logits, raw -> mlp -> direct.
struct Fixture {
  Fixture(uint32_t max_inflight = 0) {
    for (const char* name : {"scale", "mlp"}) {
      ModelSpec m;
      m.name = name;
      m.max_batch_size = 8;
      m.inputs = {T("x", {2})};
      m.outputs = {T("y", {std::string(name) == "scale" ? 2 : 1})};
      submitter.models[name] = m;
    }
    spec.name = "pipe";
    spec.platform = "ensemble";
    spec.max_batch_size = 8;
    spec.inputs = {T("raw", {2})};
    spec.outputs = {T("logits", {1}), T("direct", {1})};
    EnsembleSpec e;
    e.max_inflight = max_inflight;
    e.steps.push_back({"scale", -1, {{"x", "raw"}}, {{"y", "scaled"}}});
    e.steps.push_back({"mlp", -1, {{"x", "scaled"}}, {{"y", "logits"}}});
    e.steps.push_back({"mlp", 2, {{"x", "raw"}}, {{"y", "direct"}}});
    spec.ensemble = e;
  }
  Result<std::unique_ptr<Scheduler>> Make() {
    SchedulerContext c;
    c.spec = &spec;
    c.clock = &clock;
    c.submitter = &submitter;
    c.stats = stats;
    return MakeEnsembleScheduler(std::move(c));
  }
  std::future<Result<InferResponse>> Enqueue(Scheduler& s, std::vector<float> raw) {
    auto p = std::make_unique<PendingRequest>();
    p->request = std::make_unique<InferRequest>();
    p->request->model_name = "pipe";
    p->request->model_version = "1";
    p->request->id = "r";
    p->request->inputs.push_back(Floats("raw", std::move(raw)));
    auto promise = std::make_shared<std::promise<Result<InferResponse>>>();
    auto f = promise->get_future();
    p->callback = [promise](Result<InferResponse> r) { promise->set_value(std::move(r)); };
    EXPECT_TRUE(s.Enqueue(p).ok());
    return f;
  }
  static Result<InferResponse> Scale(const InferRequest& r) {
    std::vector<float> v = Values(r.inputs[0]);
    for (float& x : v) x *= 2;
    InferResponse out;
    out.outputs.push_back(Floats("y", v));
    return out;
  }
  static Result<InferResponse> Sum(const InferRequest& r) {
    float s = 0;
    for (float x : Values(r.inputs[0])) s += x;
    InferResponse out;
    out.outputs.push_back(Floats("y", {s}));
    return out;
  }
  ModelSpec spec;
  testing::FakeClock clock;
  FakeSubmitter submitter;
  std::shared_ptr<ModelStats> stats = std::make_shared<ModelStats>("pipe", "1", 8);
};

TEST(EnsembleScheduler, IndependentStepsRunTogetherAndEachStepStartsWhenItsInputsExist) {
  Fixture f;
  auto s = f.Make();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto answer = f.Enqueue(**s, {1.0f, 2.0f});
  // scale and the direct mlp read only the ensemble input: both are submitted at once.
  EXPECT_EQ(f.submitter.Pending(), (std::vector<std::string>{"scale", "mlp"}));
  f.submitter.Answer("mlp", Fixture::Sum);  // the direct branch finishes first
  EXPECT_EQ(f.submitter.Pending(), (std::vector<std::string>{"scale"}));
  f.submitter.Answer("scale", Fixture::Scale);
  EXPECT_EQ(f.submitter.Pending(), (std::vector<std::string>{"mlp"}));  // now the mlp on scaled
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  f.submitter.Answer("mlp", Fixture::Sum);
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  Result<InferResponse> r = answer.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model_name, "pipe");
  EXPECT_EQ(r->id, "r");
  ASSERT_EQ(r->outputs.size(), 2u);
  EXPECT_EQ(r->outputs[0].name, "logits");
  EXPECT_EQ(Values(r->outputs[0]), (std::vector<float>{6.0f}));
  EXPECT_EQ(r->outputs[1].name, "direct");
  EXPECT_EQ(Values(r->outputs[1]), (std::vector<float>{3.0f}));
  EXPECT_EQ(f.stats->success_count(), 1u);
}

TEST(EnsembleScheduler, TheFirstFailingStepFailsTheRunWithItsCodeAndNothingElseStarts) {
  Fixture f;
  auto s = f.Make();
  ASSERT_TRUE(s.ok());
  auto answer = f.Enqueue(**s, {1.0f, 2.0f});
  f.submitter.Answer("scale",
                     [](const InferRequest&) -> Result<InferResponse> { return Status::InvalidArgument("bad rows"); });
  EXPECT_EQ(f.submitter.Pending(), (std::vector<std::string>{"mlp"}));  // the direct branch still runs
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  f.submitter.Answer("mlp", Fixture::Sum);
  EXPECT_TRUE(f.submitter.Pending().empty());  // the mlp on scaled never started
  Result<InferResponse> r = answer.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "ensemble 'pipe' step 0 (model 'scale'): bad rows");
  EXPECT_EQ(f.stats->failure_count(FailureReason::kBackend), 1u);
}

TEST(EnsembleScheduler, MaxInflightHoldsFurtherRequestsInOrder) {
  Fixture f(/*max_inflight=*/1);
  auto s = f.Make();
  ASSERT_TRUE(s.ok());
  auto first = f.Enqueue(**s, {1.0f, 1.0f});
  auto second = f.Enqueue(**s, {5.0f, 5.0f});
  EXPECT_EQ((*s)->QueueSize(), 1u);
  EXPECT_EQ(f.submitter.Pending().size(), 2u);  // only the first request's steps
  f.submitter.Answer("scale", Fixture::Scale);
  f.submitter.Answer("mlp", Fixture::Sum);
  f.submitter.Answer("mlp", Fixture::Sum);
  ASSERT_TRUE(first.get().ok());
  EXPECT_EQ((*s)->QueueSize(), 0u);
  EXPECT_EQ(f.submitter.Pending().size(), 2u);  // the second request started
  f.submitter.Answer("scale", Fixture::Scale);
  f.submitter.Answer("mlp", Fixture::Sum);
  f.submitter.Answer("mlp", Fixture::Sum);
  auto r = second.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Values(r->outputs[0]), (std::vector<float>{20.0f}));
}

TEST(EnsembleScheduler, StepRequestsCarryTheVersionAndTheLoadChecksTheModels) {
  Fixture f;
  {
    auto s = f.Make();
    ASSERT_TRUE(s.ok());
    auto answer = f.Enqueue(**s, {1.0f, 2.0f});
    f.submitter.Answer("mlp", [](const InferRequest& r) {
      EXPECT_EQ(r.model_version, "2");  // step 2 names version 2
      EXPECT_EQ(r.inputs[0].name, "x");
      EXPECT_EQ(r.outputs.size(), 1u);
      return Fixture::Sum(r);
    });
    f.submitter.Answer("scale", [](const InferRequest& r) {
      EXPECT_EQ(r.model_version, "");  // -1: the default version
      return Fixture::Scale(r);
    });
    f.submitter.Answer("mlp", Fixture::Sum);
    ASSERT_TRUE(answer.get().ok());
  }
  f.submitter.models.erase("scale");
  auto missing = f.Make();
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "step 0 (model 'scale'): model 'scale' is not in the repository");
  f.submitter.models["scale"] = f.submitter.models["mlp"];
  f.submitter.models["scale"].outputs[0].dims = {2};
  f.submitter.models["scale"].outputs[0].dtype = DataType::kInt32;
  auto typed = f.Make();
  ASSERT_FALSE(typed.ok());
  EXPECT_NE(typed.status().message().find("which is INT32; the model takes FP32"), std::string::npos)
      << typed.status().message();
}

}  // namespace
}  // namespace inferd
