// PythonWorker against Debian's /usr/bin/python3 (numpy): the protocol end to
// end, BLS through a submitter, and the failure paths.
#include "backends/python/python_worker.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "testing/temp_dir.h"

namespace inferd::python {
namespace {

constexpr const char* kModel = R"(
import json, os
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.dir = args["model_repository"]
        self.cfg = json.loads(args["model_config"])

    def execute(self, requests):
        out = []
        for r in requests:
            mode = json.loads(r.parameters()).get("mode", "double")
            x = pb_utils.get_input_tensor_by_name(r, "x").as_numpy()
            if mode == "hang":
                while True:
                    pass
            if mode == "crash":
                os.kill(os.getpid(), 11)
            if mode == "refuse":
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("refused", pb_utils.TritonError.INVALID_ARG)))
                continue
            if mode == "bls_threads":
                from concurrent.futures import ThreadPoolExecutor
                def call(k):
                    resp = pb_utils.InferenceRequest(model_name="other", requested_output_names=["z"],
                                                     inputs=[pb_utils.Tensor("z_in", x + k)]).exec()
                    return pb_utils.get_output_tensor_by_name(resp, "z").as_numpy().copy()
                with ThreadPoolExecutor(4) as pool:
                    x = sum(pool.map(call, range(8)))
            if mode == "bls":
                resp = pb_utils.InferenceRequest(model_name="other", requested_output_names=["z"],
                                                 inputs=[pb_utils.Tensor("z_in", x + 1)]).exec()
                if resp.has_error():
                    raise pb_utils.TritonModelException(resp.error().message())
                x = pb_utils.get_output_tensor_by_name(resp, "z").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x * 2)]))
        return out

    def finalize(self):
        open(os.path.join(self.dir, "finalized"), "w").close()
)";

// Answers BLS calls to "other" with z = 10 * z_in, from another thread; other models: NOT_FOUND at once.
class FakeSubmitter : public RequestSubmitter {
 public:
  ~FakeSubmitter() override {
    for (auto& t : threads_) t.join();
  }
  void Submit(std::unique_ptr<InferRequest> request, InferCallback callback) override {
    if (request->model_name != "other")
      return callback(Status::NotFound("unknown model '" + request->model_name + "'"));
    threads_.emplace_back([request = std::shared_ptr<InferRequest>(std::move(request)), callback] {
      const Tensor& in = request->inputs.at(0);
      std::byte* out = nullptr;
      Tensor z = Tensor::Allocate("z", DataType::kFp32, in.shape, in.byte_size, &out);
      for (int64_t i = 0; i < in.element_count(); ++i) reinterpret_cast<float*>(out)[i] = 10 * in.as<float>()[i];
      InferResponse resp;
      resp.outputs.push_back(z);
      callback(std::move(resp));
    });
  }

 private:
  std::vector<std::thread> threads_;
};

class PythonWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
    ASSERT_TRUE(dir_.Write("m/1/model.py", kModel));
    setup_ = std::make_shared<ModelSetup>();
    setup_->model_name = "m";
    setup_->version = "1";
    setup_->model_dir = dir_.Join("m");
    setup_->version_dir = dir_.Join("m/1");
    setup_->model_file = dir_.Join("m/1/model.py");
    setup_->config_json = R"({"name":"m"})";
    setup_->input_names = {"x"};
    setup_->execute_timeout = std::chrono::milliseconds(1500);
    setup_->submitter = &submitter_;
  }

  static InferRequest Request(std::vector<float> values, const std::string& mode) {
    InferRequest r;
    r.inputs.push_back(Tensor::Copy("x", DataType::kFp32, {static_cast<int64_t>(values.size())},
                                    std::as_bytes(std::span<const float>(values))));
    r.parameters["mode"] = mode;
    return r;
  }

  inferd::testing::TempDir dir_;
  FakeSubmitter submitter_;
  std::shared_ptr<ModelSetup> setup_;
};

TEST_F(PythonWorkerTest, ExecutesRequestsWithPerRequestErrorsAndFinalizes) {
  auto w = PythonWorker::Start(setup_, 0);
  ASSERT_TRUE(w.ok()) << w.status().message();
  InferRequest a = Request({1, 2, 3}, "double"), b = Request({4}, "refuse"), c = Request({5}, "double");
  auto results = (*w)->Execute({&a, &b, &c});
  ASSERT_EQ(results.size(), 3u);
  ASSERT_TRUE(results[0].ok()) << results[0].status().message();
  EXPECT_EQ((*results[0])[0].name, "y");
  EXPECT_EQ((*results[0])[0].as<float>()[2], 6.0f);
  EXPECT_EQ(results[1].status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(results[1].status().message(), "refused");
  ASSERT_TRUE(results[2].ok());
  EXPECT_EQ((*results[2])[0].as<float>()[0], 10.0f);
  // Inputs larger than the first region size: the regions grow.
  std::vector<float> big(1 << 19, 1.0f);
  InferRequest d = Request(big, "double");
  auto r = (*w)->Execute({&d});
  ASSERT_TRUE(r[0].ok()) << r[0].status().message();
  EXPECT_EQ((*r[0])[0].as<float>()[(1 << 19) - 1], 2.0f);
  (*w)->Stop();
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("m/finalized")));
}

TEST_F(PythonWorkerTest, BlsCallsGoThroughTheSubmitter) {
  auto w = PythonWorker::Start(setup_, 0);
  ASSERT_TRUE(w.ok()) << w.status().message();
  InferRequest a = Request({1, 2}, "bls");
  auto results = (*w)->Execute({&a});
  ASSERT_TRUE(results[0].ok()) << results[0].status().message();
  EXPECT_EQ((*results[0])[0].as<float>()[1], 60.0f);  // (2 + 1) * 10 * 2
}

TEST_F(PythonWorkerTest, BlsCallsFromSeveralThreadsOfTheModelEachGetTheirAnswer) {
  auto w = PythonWorker::Start(setup_, 0);
  ASSERT_TRUE(w.ok()) << w.status().message();
  InferRequest a = Request({1}, "bls_threads");
  auto results = (*w)->Execute({&a});
  ASSERT_TRUE(results[0].ok()) << results[0].status().message();
  EXPECT_EQ((*results[0])[0].as<float>()[0], 2 * 10 * (8 * 1 + 28));  // sum over k of 10 * (1 + k), doubled
}

TEST_F(PythonWorkerTest, ACrashOrAHangBreaksTheWorkerAndKillsIt) {
  auto w = PythonWorker::Start(setup_, 0);
  ASSERT_TRUE(w.ok()) << w.status().message();
  const pid_t first = (*w)->pid();
  InferRequest crash = Request({1}, "crash");
  auto r = (*w)->Execute({&crash});
  EXPECT_EQ(r[0].status().code(), StatusCode::kInternal);
  EXPECT_NE(r[0].status().message().find("signal 11"), std::string::npos) << r[0].status().message();
  EXPECT_TRUE((*w)->broken());
  EXPECT_NE(kill(first, 0), 0);  // reaped
  auto w2 = PythonWorker::Start(setup_, 0);
  ASSERT_TRUE(w2.ok());
  InferRequest hang = Request({1}, "hang");
  r = (*w2)->Execute({&hang});
  EXPECT_EQ(r[0].status().code(), StatusCode::kDeadlineExceeded) << r[0].status().message();
  EXPECT_TRUE((*w2)->broken());
  EXPECT_NE(kill((*w2)->pid(), 0), 0);
}

constexpr const char* kDecoupled = R"(
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "x").as_numpy()
            sender = r.get_response_sender()
            for v in x:
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("y", np.array([v], np.float32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
)";

TEST_F(PythonWorkerTest, DecoupledModelsSendPartsThenAnEmptyFinalAnswer) {
  ASSERT_TRUE(dir_.Write("m/1/model.py", kDecoupled));
  setup_->decoupled = true;
  auto w = PythonWorker::Start(setup_, 0);
  ASSERT_TRUE(w.ok()) << w.status().message();
  InferRequest a = Request({1, 2, 3}, ""), b = Request({7}, ""), c = Request({8, 9}, "");
  std::vector<float> got;
  std::vector<PartialSender> partial = {[&](std::vector<Tensor> outs) {
                                          got.push_back(outs.at(0).as<float>()[0]);
                                          return true;
                                        },
                                        PartialSender(), PartialSender()};
  auto r = (*w)->Execute({&a, &b, &c}, partial);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(got, (std::vector<float>{1, 2, 3}));
  ASSERT_TRUE(r[0].ok()) << r[0].status().message();
  EXPECT_TRUE(r[0]->empty());  // the final flag alone
  // No sender (unary): one response is the answer; two are an error.
  ASSERT_TRUE(r[1].ok()) << r[1].status().message();
  EXPECT_EQ(r[1]->at(0).as<float>()[0], 7.0f);
  EXPECT_EQ(r[2].status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE((*w)->broken());
}

TEST_F(PythonWorkerTest, InitializeErrorsAndMissingPythonAreLoadErrors) {
  ASSERT_TRUE(dir_.Write("m/1/model.py",
                         "class TritonPythonModel:\n    def initialize(self, args):\n"
                         "        raise KeyError('weights')\n"));
  auto w = PythonWorker::Start(setup_, 0);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("KeyError: 'weights'"), std::string::npos) << w.status().message();
  setup_->python = "/nonexistent/python3";
  EXPECT_FALSE(PythonWorker::Start(setup_, 0).ok());
  // An interpreter without numpy: the load fails saying so (not just "exited with status 1").
  ASSERT_TRUE(dir_.Write("fake/numpy/__init__.py", "raise ImportError('no numpy here')\n"));
  ASSERT_TRUE(
      dir_.Write("nonumpy.sh", "#!/bin/sh\nPYTHONPATH=" + dir_.Join("fake") + " exec /usr/bin/python3 \"$@\"\n"));
  ASSERT_EQ(chmod(dir_.Join("nonumpy.sh").c_str(), 0755), 0);
  setup_->python = dir_.Join("nonumpy.sh");
  w = PythonWorker::Start(setup_, 0);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("cannot start"), std::string::npos) << w.status().message();
  EXPECT_NE(w.status().message().find("no numpy here"), std::string::npos) << w.status().message();
}

}  // namespace
}  // namespace inferd::python
