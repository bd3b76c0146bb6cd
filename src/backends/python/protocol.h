// The messages between the server and a Python worker
// (stub/inferd_python_worker.py): JSON objects in length-prefixed frames;
// tensor bytes live in the shared regions and messages give their offsets.
//
// Server -> worker: init, execute, bls_result, finalize.
// Worker -> server: ready | init_error | config (answers to init), responses |
// execute_error (answers to execute), bls (a call to another model during
// execute), log (any time), finalized. Decoupled models answer an execute
// with `response` messages (one request's part, or its last with `final`)
// and `executed` once execute() returned; parts may follow it.
//
// Everything the worker sends is checked: a malformed message is an error
// (the worker is then restarted), never undefined behaviour in the server.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/datatype.h"
#include "core/infer_request.h"
#include "core/status.h"
#include "core/tensor.h"

namespace inferd::python {

struct TensorDesc {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape shape;
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct InitMessage {
  std::map<std::string, std::string> args;  // Triton's `args` dict
  std::string model_file;
  std::string version_dir;
  uint64_t shm_limit = 0;
  bool auto_complete = false;
};

struct RequestToSend {
  std::string id;
  const Parameters* parameters = nullptr;
  std::vector<TensorDesc> inputs;
  std::vector<std::string> outputs;  // requested names; empty = all
};

std::string EncodeInit(const InitMessage& m);
std::string EncodeExecute(std::string_view model, uint64_t in_size, const std::vector<RequestToSend>& requests,
                          bool decoupled = false);
// `status` not OK: the call failed with it; else `outputs`. `final`: the
// call's last answer (a decoupled callee sends parts first).
std::string EncodeBlsResult(uint64_t id, uint64_t in_size, const Status& status, const std::vector<TensorDesc>& outputs,
                            bool final = true);
std::string EncodeFinalize();

struct BlsCall {
  uint64_t id = 0;
  std::string model;
  std::string version;
  std::string request_id;
  std::vector<TensorDesc> inputs;
  std::vector<std::string> outputs;
  Parameters parameters;
  uint64_t timeout_us = 0;
  bool decoupled = false;  // the caller iterates over the callee's parts
  // Which request of the batch being executed made the call (Triton's
  // InferenceRequest(trace=request.trace())): its position among the requests
  // execute() received; -1 = not said.
  int64_t trace_index = -1;
};

struct WorkerMessage {
  enum class Kind {
    kReady,
    kInitError,
    kConfig,
    kResponses,
    kExecuteError,
    kBls,
    kLog,
    kFinalized,
    kResponse,  // decoupled: one response of request `request` (answers[0]), the last when `final`
    kExecuted,  // decoupled: execute() returned
  };
  Kind kind = Kind::kReady;
  std::optional<uint64_t> out_size;                      // the to-server region's size, when reported
  std::string text;                                      // init_error, execute_error, finalized (empty = fine), log
  std::string level;                                     // log: info, warn, error, verbose
  std::vector<Result<std::vector<TensorDesc>>> answers;  // responses: one per request; response: one
  size_t request = 0;                                    // response: the request's index in its execute
  bool final = false;                                    // response
  BlsCall bls;
  std::string config_json;      // config: the completed config (JSON)
  bool config_defined = false;  // config: model.py defines auto_complete_config
};

// At most `max_answers` answers are accepted in one `responses` message.
Result<WorkerMessage> ParseWorkerMessage(std::string_view json, size_t max_answers = 1u << 20);

// A copy of the described tensor out of `region`: bounds, byte size against
// shape and datatype, and BYTES' length prefixes are checked.
Result<Tensor> CopyTensor(const TensorDesc& d, std::span<const std::byte> region);

// TritonError codes (pb_utils.TritonError.INVALID_ARG, ...) as statuses.
Status StatusFromTritonError(int64_t code, std::string message);
// The other way, for BLS answers.
int64_t TritonErrorCode(const Status& status);

}  // namespace inferd::python
