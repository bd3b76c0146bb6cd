// PythonWorker: one running model.py instance in its own process
// (WorkerProcess), its two shared regions and the protocol's request loop.
//
// Lifetime: Start spawns the process and runs initialize(); Execute runs
// execute() for a batch of requests; Stop runs finalize() and ends the
// process. A worker that crashed, hung past its timeout or broke the
// protocol is killed and marked broken(): its owner starts a new one.
//
// BLS: while execute() runs, the worker may call other models; those calls
// go through the RequestSubmitter, and their answers are written back from
// whichever thread completes them (AnswerBls, serialised with mu_).
//
// Thread-safety: Start, Execute and Stop on the owner's thread (the model
// instance's worker); AnswerBls from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/python/protocol.h"
#include "backends/python/shared_region.h"
#include "backends/python/worker_process.h"
#include "core/infer_request.h"
#include "core/model_spec.h"
#include "core/mutex.h"
#include "core/request_submitter.h"

namespace inferd::python {

// What every instance of one loaded Python model shares (immutable).
struct ModelSetup {
  std::string model_name;
  std::string version;                   // "1"
  std::string model_dir;                 // Triton's args["model_repository"]
  std::string version_dir;               // added to sys.path
  std::string model_file;                // <version_dir>/model.py (or default_model_filename)
  std::string config_json;               // args["model_config"]
  std::vector<std::string> input_names;  // ModelSpec::inputs order
  std::string python = "/usr/bin/python3";
  std::chrono::milliseconds init_timeout{600000};
  std::chrono::milliseconds execute_timeout{300000};
  std::chrono::milliseconds finalize_timeout{30000};
  uint64_t shm_limit = 1ull << 30;
  int threads = 1;                        // OMP/OpenBLAS/MKL threads in the worker
  bool decoupled = false;                 // responses through each request's sender (backend.h contract 12)
  RequestSubmitter* submitter = nullptr;  // BLS; null = BLS answers an error
};

class PythonWorker : public std::enable_shared_from_this<PythonWorker> {
 public:
  // Spawns the worker and runs initialize(args). `instance` numbers it
  // (Triton's model_instance_name "<model>_0_<instance>").
  static Result<std::shared_ptr<PythonWorker>> Start(std::shared_ptr<const ModelSetup> setup, int instance);
  // Spawns a worker that only runs model.py's auto_complete_config on
  // `config_json` and exits. Returns the completed config and whether
  // model.py defines the method.
  static Result<std::pair<std::string, bool>> AutoCompleteConfig(const ModelSetup& setup);

  ~PythonWorker();

  // One result per request (inputs in setup.input_names order). Decoupled
  // models send parts through `partial` (backend.h contract 12) and return
  // only once every request got its final response.
  std::vector<Result<std::vector<Tensor>>> Execute(const std::vector<const InferRequest*>& requests,
                                                   const std::vector<PartialSender>& partial = {});
  // finalize(), then the process ends (killed if it does not in time).
  void Stop();
  bool broken() const { return broken_.load(); }
  pid_t pid() const { return process_->pid(); }

  // A BLS call's answer (any thread); `final` false for a decoupled callee's parts.
  void AnswerBls(uint64_t id, Result<InferResponse> result, bool final = true);

 private:
  PythonWorker() = default;
  static Result<std::shared_ptr<PythonWorker>> Spawn(std::shared_ptr<const ModelSetup> setup);
  Status SendInit(const InitMessage& init);
  // The next message other than a log line (those are logged here).
  Result<WorkerMessage> Next(WorkerProcess::Deadline deadline);
  void HandleBls(const BlsCall& call);
  // The traces of the requests being executed (in the order execute() got
  // them), for BLS calls made meanwhile; only the executing thread uses it.
  std::vector<std::shared_ptr<const TraceParent>> bls_callers_;
  // The outputs a response describes, copied out of the to-server region.
  Result<std::vector<Tensor>> CopyOutputs(const Result<std::vector<TensorDesc>>& answer);
  // A decoupled execute: responses until every sent request got its last.
  void CollectDecoupled(const std::vector<size_t>& sent_index, const std::vector<PartialSender>& partial,
                        WorkerProcess::Deadline deadline, std::vector<Result<std::vector<Tensor>>>* results);
  // The process is beyond use: kill it, reap it, say why. `limit`: the
  // timeout the failed wait ran under (named when it expired).
  Status Break(const Status& why, const std::string& during, std::chrono::milliseconds limit);

  std::shared_ptr<const ModelSetup> setup_;
  std::unique_ptr<WorkerProcess> process_;
  std::string label_;  // "model 'x' version 1 instance 0"
  Mutex mu_;
  SharedRegion to_worker_ TSA_GUARDED_BY(mu_);
  SharedRegion to_server_;  // owner thread only
  std::atomic<bool> broken_{false};
  bool stopped_ = false;
};

}  // namespace inferd::python
