// ModelManager unit tests: swap, labels, poll, rollback, on-demand loading
// and eviction, driven with a FakeClock and the gated test backend (no
// Python, no sleeps; every wait is bounded).
#include "manager/model_manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>

#include "manager/repository_source.h"
#include "testing/fake_clock.h"
#include "testing/gated_backend.h"
#include "testing/memory_filesystem.h"
#include "testing/test_requests.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using testing::F32;

constexpr auto kBound = std::chrono::seconds(20);

// Set by the manager's on_drain_start hook the first time retired versions
// of a model begin draining (the snapshot without them is published).
struct DrainSignal {
  std::promise<std::string> promise;
  std::future<std::string> future = promise.get_future();
  std::atomic<bool> fired{false};
  void Hook(ModelManager::Options* o) {
    o->on_drain_start = [this](const std::string& model) {
      if (!fired.exchange(true)) promise.set_value(model);
    };
  }
  bool Await(const std::string& model) {
    return future.wait_for(kBound) == std::future_status::ready && future.get() == model;
  }
};

std::string Config(const std::string& extra = "") {
  return R"(backend: "gated" max_batch_size: 4
    input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ] output [ { name: "y" data_type: TYPE_FP32 dims: [ 2 ] } ]
    )" + extra;
}

class ModelManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("inferd_manager_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::remove_all(root_.string() + ".state");
    fs::create_directories(root_);
    ASSERT_TRUE(backends_.Register(std::make_unique<testing::GatedBackend>(&gate_)).ok());
  }
  void TearDown() override {
    source_.reset();
    manager_.reset();
    fs::remove_all(root_);
    fs::remove_all(root_.string() + ".state");
  }

  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  void AddModel(const std::string& name, std::vector<int> versions, const std::string& extra = "") {
    Write(name + "/config.pbtxt", Config(extra));
    for (int v : versions) fs::create_directories(root_ / name / std::to_string(v));
  }

  // A manager over root_ on disk, or over `repository` when given.
  void Make(ModelManager::Options o = {}, std::unique_ptr<ModelRepository> repository = nullptr) {
    if (!state_) {
      state_ = MakeDirectoryStateStore((root_.string() + ".state"));
      ASSERT_TRUE(state_->Open().ok());
    }
    o.state = state_.get();
    drained_.Hook(&o);
    repository_ = repository ? std::move(repository) : std::make_unique<ModelRepository>(root_.string());
    manager_ = std::make_unique<ModelManager>(std::move(o), repository_.get(), &backends_, &clock_);
  }

  // Version numbers the model serves, ascending; empty when none.
  std::vector<int64_t> ServingVersions(const std::string& name) {
    std::vector<int64_t> out;
    if (auto s = manager_->Serving(name))
      for (const auto& [v, _] : s->versions) out.push_back(v);
    return out;
  }
  std::shared_ptr<ModelVersion> Version(const std::string& name, int64_t v) {
    auto s = manager_->Serving(name);
    if (!s || !s->versions.count(v)) return nullptr;
    return s->versions.at(v);
  }
  int64_t DefaultVersion(const std::string& name) {
    auto s = manager_->Serving(name);
    return s ? s->default_version : 0;
  }
  // Index entries of `name` as "version:STATE".
  std::vector<std::string> IndexOf(const std::string& name) {
    std::vector<std::string> out;
    auto index = manager_->RepositoryIndex(false);
    EXPECT_TRUE(index.ok());
    for (const auto& e : *index)
      if (e.name == name) out.push_back(e.version + ":" + e.state);
    return out;
  }

  // Enqueues one request on `mv` directly (the facade's job, not under test here).
  std::future<Result<InferResponse>> Submit(const std::shared_ptr<ModelVersion>& mv) {
    auto promise = std::make_shared<std::promise<Result<InferResponse>>>();
    auto future = promise->get_future();
    auto p = std::make_unique<PendingRequest>();
    p->request = std::make_unique<InferRequest>();
    p->request->model_name = mv->spec().name;
    p->request->model_version = mv->version_string();
    p->request->inputs.push_back(F32("x", {1, 2}, {1, 2}));
    p->callback = [promise](Result<InferResponse> r) { promise->set_value(std::move(r)); };
    p->arrival = clock_.Now();
    Status st = mv->scheduler().Enqueue(p);
    if (!st.ok()) promise->set_value(st);
    return future;
  }

  fs::path root_;
  DrainSignal drained_;
  testing::FakeClock clock_;
  testing::Gate gate_;
  BackendRegistry backends_;
  std::unique_ptr<ControlStateStore> state_;
  std::unique_ptr<ModelRepository> repository_;
  std::unique_ptr<ModelManager> manager_;
  std::unique_ptr<RepositorySource> source_;
};

TEST_F(ModelManagerTest, LoadsThePolicyVersionsAndPublishesThem) {
  AddModel("m", {1, 2, 3}, "version_policy: { latest: { num_versions: 2 } }");
  Make();
  ASSERT_TRUE(manager_->Reconcile("m", {}).ok());
  EXPECT_EQ(ServingVersions("m"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(DefaultVersion("m"), 3);
  EXPECT_EQ(IndexOf("m"), (std::vector<std::string>{"2:READY", "3:READY"}));
  EXPECT_EQ(manager_->ModelStateOf("m").state, ModelState::kReady);
  EXPECT_EQ(gate_.loads_started(), 2);
}

TEST_F(ModelManagerTest, UnchangedVersionsKeepServingAndChangedOnesSwapAfterDraining) {
  AddModel("m", {1});
  Make();
  ASSERT_TRUE(manager_->Reconcile("m", {}).ok());
  auto v1 = Version("m", 1);
  ASSERT_NE(v1, nullptr);
  ASSERT_TRUE(manager_->Reconcile("m", {}).ok());
  EXPECT_EQ(Version("m", 1), v1);  // same snapshot, not reloaded (nothing drains)
  EXPECT_EQ(gate_.loads_started(), 1);

  // A request in flight on the old snapshot finishes after the swap.
  gate_.Close();
  auto in_flight = Submit(v1);
  ASSERT_TRUE(gate_.AwaitExecutionsStarted(1));
  Write("m/1/weights.bin", "changed");
  auto reload = std::async(std::launch::async, [&] { return manager_->Reconcile("m", {}); });
  // The new snapshot serves at once; the old one drains before Reconcile returns.
  ASSERT_TRUE(drained_.Await("m"));
  EXPECT_NE(Version("m", 1), v1);
  ASSERT_NE(Version("m", 1), nullptr);
  EXPECT_EQ(reload.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  gate_.ReleaseExecutions(1);
  ASSERT_EQ(reload.wait_for(kBound), std::future_status::ready);
  EXPECT_TRUE(reload.get().ok());
  ASSERT_EQ(in_flight.wait_for(kBound), std::future_status::ready);
  auto r = in_flight.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(testing::ToFloats(r->outputs[0]), (std::vector<float>{1, 2}));
  // The retired snapshot takes no new requests.
  gate_.Open();
  EXPECT_EQ(Submit(v1).get().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(IndexOf("m"), (std::vector<std::string>{"1:READY"}));
}

TEST_F(ModelManagerTest, AFailedVersionNeverReplacesAServingOne) {
  AddModel("m", {1, 2}, "version_policy: { latest: { num_versions: 2 } }");
  Make();
  ASSERT_TRUE(manager_->Reconcile("m", {}).ok());
  auto v1 = Version("m", 1);
  Write("m/3/fail_load", "bad weights");
  // The policy now wants 2 and 3; 3 fails, so 1 keeps serving beside 2.
  Status st = manager_->Reconcile("m", {});
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("version 3: gated load failed: bad weights"), std::string::npos) << st.message();
  EXPECT_EQ(ServingVersions("m"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(Version("m", 1), v1);
  EXPECT_EQ(DefaultVersion("m"), 2);
  EXPECT_EQ(IndexOf("m"), (std::vector<std::string>{"1:READY", "2:READY", "3:UNAVAILABLE"}));
  EXPECT_EQ(manager_->ModelStateOf("m").state, ModelState::kReady);
  EXPECT_EQ(manager_->metrics().load_failures.load(), 1u);

  // Not retried while its files are unchanged, unless asked (explicit load).
  Aspiration poll;
  poll.retry_failed = false;
  EXPECT_TRUE(manager_->Reconcile("m", poll).ok());
  EXPECT_EQ(gate_.loads_started(), 3);
  EXPECT_FALSE(manager_->Reconcile("m", {}).ok());
  EXPECT_EQ(gate_.loads_started(), 4);
}

TEST_F(ModelManagerTest, AModelWhoseOnlyVersionFailsIsFailedWithTheReason) {
  Write("m/config.pbtxt", Config());
  Write("m/1/fail_load", "truncated");
  Make();
  EXPECT_FALSE(manager_->Reconcile("m", {}).ok());
  const StateInfo s = manager_->ModelStateOf("m");
  EXPECT_EQ(s.state, ModelState::kFailed);
  EXPECT_EQ(s.reason, "version 1: gated load failed: truncated");
  EXPECT_EQ(IndexOf("m"), (std::vector<std::string>{":UNAVAILABLE"}));
  EXPECT_EQ(manager_->NotServing("m").code(), StatusCode::kUnavailable);
}

TEST_F(ModelManagerTest, LoadingAModelThatDoesNotExistLeavesNoEntry) {
  Make();
  EXPECT_EQ(manager_->Reconcile("ghost", {}).code(), StatusCode::kNotFound);
  EXPECT_TRUE(manager_->ModelNames().empty());
  EXPECT_EQ(manager_->NotServing("ghost").code(), StatusCode::kNotFound);
}

TEST_F(ModelManagerTest, UnloadDrainsAndLeavesTheModelUnavailable) {
  AddModel("m", {1});
  Make();
  ASSERT_TRUE(manager_->Reconcile("m", {}).ok());
  gate_.Close();
  auto in_flight = Submit(Version("m", 1));
  ASSERT_TRUE(gate_.AwaitExecutionsStarted(1));
  Aspiration unload;
  unload.serve = false;
  auto done = std::async(std::launch::async, [&] { return manager_->Reconcile("m", unload); });
  // While it drains, the model serves nothing and is UNLOADING.
  ASSERT_TRUE(drained_.Await("m"));
  EXPECT_EQ(manager_->Serving("m"), nullptr);
  EXPECT_EQ(IndexOf("m"), (std::vector<std::string>{":UNLOADING"}));
  EXPECT_EQ(done.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  gate_.ReleaseExecutions(1);
  ASSERT_EQ(done.wait_for(kBound), std::future_status::ready);
  EXPECT_TRUE(done.get().ok());
  ASSERT_EQ(in_flight.wait_for(kBound), std::future_status::ready);
  EXPECT_TRUE(in_flight.get().ok());
  EXPECT_EQ(manager_->ModelStateOf("m").state, ModelState::kUnavailable);
  EXPECT_EQ(manager_->ModelStateOf("m").reason, "unloaded");
}

TEST_F(ModelManagerTest, LabelsLoadTheirVersionAndRollbackRestoresThePreviousDefault) {
  AddModel("m", {1, 2});
  Make();
  ASSERT_TRUE(manager_->Reconcile("m", {}).ok());
  EXPECT_EQ(ServingVersions("m"), (std::vector<int64_t>{2}));

  // Labelling a version that does not serve loads it first.
  auto info = manager_->SetLabel("m", "canary", 1);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(ServingVersions("m"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(DefaultVersion("m"), 2);
  auto canary = manager_->ResolveLabel("m", "canary");
  ASSERT_TRUE(canary.ok());
  EXPECT_EQ(*canary, 1);
  EXPECT_EQ(manager_->Serving("m")->labels.Find("canary"), 1);  // published for routing

  // `stable` moves the default; rollback moves it back.
  ASSERT_TRUE(manager_->SetLabel("m", kStableLabel, 1).ok());
  EXPECT_EQ(DefaultVersion("m"), 1);
  auto rb = manager_->Rollback("m");
  ASSERT_TRUE(rb.ok()) << rb.status().ToString();
  EXPECT_EQ(rb->from_version, "1");
  EXPECT_EQ(rb->to_version, "2");
  EXPECT_EQ(DefaultVersion("m"), 2);

  // Labels persist in the control-state store (not in the repository) and
  // are read back by a fresh manager.
  EXPECT_FALSE(fs::exists(root_ / "m" / kVersionLabelsFile));
  EXPECT_TRUE(fs::exists(root_.string() + ".state/m/labels.json"));
  manager_.reset();
  Make();
  ASSERT_TRUE(manager_->Reconcile("m", {}).ok());
  EXPECT_EQ(ServingVersions("m"), (std::vector<int64_t>{1, 2}));  // canary still points at 1
  EXPECT_EQ(DefaultVersion("m"), 2);

  EXPECT_EQ(manager_->SetLabel("m", "x", 9).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(manager_->SetLabel("m", "12", 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(manager_->DeleteLabel("m", "nope").status().code(), StatusCode::kNotFound);
}

TEST_F(ModelManagerTest, ALabelWhoseVersionFailsChangesNothing) {
  AddModel("m", {1, 2});
  Write("m/1/fail_load", "corrupt");
  Make();
  ASSERT_TRUE(manager_->Reconcile("m", {}).ok());
  auto r = manager_->SetLabel("m", kStableLabel, 1);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(DefaultVersion("m"), 2);
  EXPECT_FALSE(manager_->ResolveLabel("m", kStableLabel).ok());
}

// The repository is read only through its Filesystem: here an in-memory
// one. Configs, version folders, the legacy labels file and warm-up data all
// come from it; a rewritten file is a changed version; labels go to the
// control-state store and the repository is never written.
TEST_F(ModelManagerTest, ARepositoryInAnotherFilesystemIsReadThroughItAndNeverWritten) {
  auto mem = std::make_shared<testing::MemoryFilesystem>();
  mem->Put("/repo/m/config.pbtxt", Config(R"(version_policy { all { } }
    model_warmup [ { name: "w" batch_size: 1 inputs { key: "x" value: {
      data_type: TYPE_FP32 dims: [ 2 ] input_data_file: "x.bin" } } } ])"));
  mem->Put("/repo/m/warmup/x.bin", std::string(8, '\0'));
  mem->Put("/repo/m/version_labels.json", R"({"labels": {"stable": 1}})");
  mem->MakeDirectory("/repo/m/1");
  mem->Put("/repo/m/2/weights", "v2");
  mem->Put("/repo/w/config.pbtxt", Config(R"(model_warmup [ { name: "w" batch_size: 1 inputs { key: "x" value: {
      data_type: TYPE_FP32 dims: [ 2 ] input_data_file: "missing.bin" } } } ])"));
  mem->MakeDirectory("/repo/w/1");
  Make({}, std::make_unique<ModelRepository>("/repo", mem));
  RepositorySource::Options so;
  so.control_mode = ModelControlMode::kPoll;
  so.poll_interval = Duration(0);
  source_ = std::make_unique<RepositorySource>(so, repository_.get(), manager_.get(), &clock_);
  ASSERT_TRUE(source_->Start().ok());
  EXPECT_EQ(ServingVersions("m"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(DefaultVersion("m"), 1);  // the legacy label file, read through the filesystem
  EXPECT_NE(manager_->ModelStateOf("w").reason.find("cannot open /repo/w/warmup/missing.bin"), std::string::npos)
      << manager_->ModelStateOf("w").reason;
  EXPECT_EQ(manager_->ModelNames(), (std::vector<std::string>{"m", "w"}));

  auto v1 = Version("m", 1), v2 = Version("m", 2);
  mem->Put("/repo/m/2/weights", "v2 again");  // rewritten: version 2 changed, version 1 did not
  source_->Poll();
  EXPECT_EQ(Version("m", 1), v1);
  EXPECT_NE(Version("m", 2), v2);
  ASSERT_NE(Version("m", 2), nullptr);

  const size_t files = mem->ListFilesRecursive("/repo").size();
  ASSERT_TRUE(manager_->SetLabel("m", kStableLabel, 2).ok());
  EXPECT_EQ(DefaultVersion("m"), 2);
  EXPECT_EQ(mem->ListFilesRecursive("/repo").size(), files);
  EXPECT_TRUE(fs::exists(root_.string() + ".state/m/labels.json"));

  mem->Remove("/repo/m");
  source_->Poll();
  EXPECT_EQ(ServingVersions("m"), (std::vector<int64_t>{}));
}

TEST_F(ModelManagerTest, PollLoadsNewChangedAndRemovedModelsOnTheClock) {
  AddModel("a", {1});
  Make();
  RepositorySource::Options so;
  so.control_mode = ModelControlMode::kPoll;
  so.poll_interval = seconds(15);
  source_ = std::make_unique<RepositorySource>(so, repository_.get(), manager_.get(), &clock_);
  ASSERT_TRUE(source_->Start().ok());
  EXPECT_EQ(ServingVersions("a"), (std::vector<int64_t>{1}));
  clock_.AwaitWaitCalls(1);  // the poll thread waits for its next rescan

  AddModel("b", {1});
  fs::remove_all(root_ / "a");
  clock_.Advance(seconds(14));  // not yet
  clock_.AwaitWaitCalls(2);
  EXPECT_EQ(ServingVersions("b"), (std::vector<int64_t>{}));
  clock_.Advance(seconds(1));  // a rescan runs, then the thread waits again
  clock_.AwaitWaitCalls(3);
  EXPECT_EQ(ServingVersions("b"), (std::vector<int64_t>{1}));
  EXPECT_EQ(ServingVersions("a"), (std::vector<int64_t>{}));
  EXPECT_EQ(manager_->ModelNames(), (std::vector<std::string>{"b"}));

  // A broken config shows as a failure with its reason, not as READY.
  Write("b/config.pbtxt", "backend: \"gated\" not_a_field: 1");
  Write("c/config.pbtxt", "backend: \"gated\" not_a_field: 1");
  fs::create_directories(root_ / "c/1");
  source_->Poll();
  EXPECT_EQ(ServingVersions("b"), (std::vector<int64_t>{1}));  // the old snapshot keeps serving
  EXPECT_NE(manager_->ModelStateOf("b").reason.find("not_a_field"), std::string::npos);
  auto index = manager_->RepositoryIndex(false);
  ASSERT_TRUE(index.ok());
  for (const auto& e : *index) {
    if (e.name != "b") continue;
    EXPECT_EQ(e.state, "READY");
    EXPECT_NE(e.reason.find("no longer loads (this version keeps serving)"), std::string::npos) << e.reason;
    EXPECT_NE(e.reason.find("not_a_field"), std::string::npos) << e.reason;
  }
  // Fixed again: the note goes.
  Write("b/config.pbtxt", Config());
  source_->Poll();
  EXPECT_EQ(IndexOf("b"), (std::vector<std::string>{"1:READY"}));
  EXPECT_EQ(manager_->RepositoryIndex(false)->front().reason, "");
  EXPECT_EQ(manager_->ModelStateOf("c").state, ModelState::kFailed);
  EXPECT_EQ(IndexOf("c"), (std::vector<std::string>{":UNAVAILABLE"}));
}

// A stop signal during start-up (serve's StartWatch) abandons the start: the
// load in progress finishes, no further model loads, Start returns Cancelled.
TEST_F(ModelManagerTest, AnAbandonedStartLoadsNoFurtherModel) {
  AddModel("a", {1});
  AddModel("b", {1});
  Make();
  gate_.HoldLoads(true);
  source_ = std::make_unique<RepositorySource>(RepositorySource::Options{}, repository_.get(), manager_.get(), &clock_);
  Status started;
  std::thread start([&] { started = source_->Start(); });
  ASSERT_TRUE(gate_.AwaitLoadsStarted(1));  // "a" (models load in name order)
  source_->AbandonStart();
  gate_.HoldLoads(false);
  start.join();
  EXPECT_EQ(started.code(), StatusCode::kCancelled) << started.message();
  EXPECT_EQ(ServingVersions("a"), (std::vector<int64_t>{1}));
  EXPECT_EQ(ServingVersions("b"), (std::vector<int64_t>{}));
}

class OnDemandTest : public ModelManagerTest {
 protected:
  void MakeOnDemand(uint64_t budget) {
    ModelManager::Options o;
    o.residency = Residency::kOnDemand;
    o.memory_budget_bytes = budget;
    o.min_residency = seconds(10);
    o.model_load_threads = 1;
    o.on_load_done = [this](OnDemandLoader::Waiter w, const Status& st) {
      std::lock_guard<std::mutex> g(answers_mu_);
      answers_.emplace_back(w.request->id, st.code());
      answers_cv_.notify_all();
    };
    Make(std::move(o));
  }
  bool AwaitAnswers(size_t n) {
    std::unique_lock<std::mutex> g(answers_mu_);
    return answers_cv_.wait_for(g, kBound, [&] { return answers_.size() >= n; });
  }
  std::mutex answers_mu_;
  std::condition_variable answers_cv_;
  std::vector<std::pair<std::string, StatusCode>> answers_;
};

// Over index_at_start_limit models, Start returns before any config is read;
// a thread of the source indexes them, loading pinned ones as it finds them.
TEST_F(OnDemandTest, ARepositoryOverTheIndexLimitIsIndexedAfterStartReturns) {
  AddModel("m", {1});
  AddModel("pinned", {1}, R"(parameters: { key: "pinned" value: { string_value: "true" } })");
  MakeOnDemand(0);
  gate_.HoldLoads(true);
  RepositorySource::Options so;
  so.index_at_start_limit = 1;  // 2 models: over it
  source_ = std::make_unique<RepositorySource>(so, repository_.get(), manager_.get(), &clock_);
  ASSERT_TRUE(source_->Start().ok());       // returns with the pinned model's load still held
  ASSERT_TRUE(gate_.AwaitLoadsStarted(1));  // the index reached "pinned" (after "m") and loads it
  EXPECT_EQ(manager_->ModelStateOf("m").reason, "not resident (on demand: loads on its first request)");
  gate_.HoldLoads(false);
  source_->Stop();  // joins the index thread: its load has finished
  EXPECT_EQ(ServingVersions("pinned"), (std::vector<int64_t>{1}));
  EXPECT_EQ(ServingVersions("m"), (std::vector<int64_t>{}));
}

TEST_F(OnDemandTest, IndexedModelsLoadForTheirFirstRequest) {
  AddModel("m", {1});
  AddModel("pinned", {1}, R"(parameters: { key: "pinned" value: { string_value: "true" } })");
  MakeOnDemand(0);
  EXPECT_FALSE(manager_->Index("m"));
  EXPECT_TRUE(manager_->Index("pinned"));
  EXPECT_EQ(manager_->ModelStateOf("m").state, ModelState::kUnavailable);
  EXPECT_EQ(manager_->ModelStateOf("m").reason, "not resident (on demand: loads on its first request)");

  gate_.HoldLoads(true);
  OnDemandLoader::Waiter w;
  w.request = std::make_unique<InferRequest>();
  w.request->model_name = "m";
  w.request->id = "first";
  w.deadline = clock_.Now() + seconds(30);
  manager_->LoadInBackground("m", std::move(w));
  ASSERT_TRUE(gate_.AwaitLoadsStarted(1));
  EXPECT_EQ(IndexOf("m"), (std::vector<std::string>{":LOADING"}));
  gate_.HoldLoads(false);
  ASSERT_TRUE(AwaitAnswers(1));
  EXPECT_EQ(answers_[0], std::make_pair(std::string("first"), StatusCode::kOk));
  EXPECT_EQ(ServingVersions("m"), (std::vector<int64_t>{1}));
  EXPECT_EQ(manager_->metrics().cold_starts.load(), 1u);
}

TEST_F(OnDemandTest, TheBudgetEvictsTheLeastRecentlyUsedIdleModel) {
  const std::string size = R"(parameters: { key: "memory_bytes" value: { string_value: "100" } })";
  AddModel("a", {1}, size);
  AddModel("b", {1}, size);
  AddModel("c", {1}, size);
  MakeOnDemand(250);
  ASSERT_TRUE(manager_->EnsureResident("a").ok());
  clock_.Advance(seconds(1));
  ASSERT_TRUE(manager_->EnsureResident("b").ok());
  Version("a", 1)->Touch(clock_.Now());  // a is now more recently used than b
  // Too young to evict: c loads over budget.
  ASSERT_TRUE(manager_->EnsureResident("c").ok());
  EXPECT_EQ(manager_->metrics().over_budget_loads.load(), 1u);
  EXPECT_EQ(manager_->metrics().evictions.load(), 0u);
  EXPECT_EQ(ServingVersions("b"), (std::vector<int64_t>{1}));

  // Past the minimum residency, the next load evicts: b is the least recently used.
  clock_.Advance(seconds(11));
  Version("a", 1)->Touch(clock_.Now());
  Version("c", 1)->Touch(clock_.Now());
  Aspiration reload;
  ASSERT_TRUE(manager_->Reconcile("c", reload).ok());  // a reload: sized after it, evicts to fit
  EXPECT_EQ(manager_->metrics().evictions.load(), 1u);
  EXPECT_EQ(ServingVersions("b"), (std::vector<int64_t>{}));
  EXPECT_EQ(manager_->ModelStateOf("b").state, ModelState::kEvicted);
  EXPECT_EQ(ServingVersions("a"), (std::vector<int64_t>{1}));
  EXPECT_EQ(ServingVersions("c"), (std::vector<int64_t>{1}));
  auto listing = manager_->ListModels();
  EXPECT_EQ(listing.used_bytes, 200u);

  // An evicted model loads again when asked.
  ASSERT_TRUE(manager_->EnsureResident("b").ok());
  EXPECT_EQ(ServingVersions("b"), (std::vector<int64_t>{1}));
}

TEST_F(OnDemandTest, ShutdownAnswersWaitersAndDrainsEverything) {
  AddModel("m", {1});
  AddModel("n", {1});
  MakeOnDemand(0);
  ASSERT_TRUE(manager_->EnsureResident("n").ok());
  auto v = Version("n", 1);
  gate_.HoldLoads(true);
  for (const char* id : {"a", "b"}) {
    OnDemandLoader::Waiter w;
    w.request = std::make_unique<InferRequest>();
    w.request->model_name = "m";
    w.request->id = id;
    w.deadline = clock_.Now() + seconds(30);
    manager_->LoadInBackground("m", std::move(w));
  }
  ASSERT_TRUE(gate_.AwaitLoadsStarted(2));
  auto stopped = std::async(std::launch::async, [&] { manager_->Shutdown(); });
  gate_.HoldLoads(false);
  ASSERT_EQ(stopped.wait_for(kBound), std::future_status::ready);
  ASSERT_TRUE(AwaitAnswers(2));
  EXPECT_EQ(Submit(v).get().status().code(), StatusCode::kUnavailable);  // drained
  EXPECT_EQ(manager_->Reconcile("n", {}).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace inferd
