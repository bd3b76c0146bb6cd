#include "backends/python/python_worker.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/spdlog.h>

#include <cstring>

#include "backends/python/stub_sources.h"

namespace inferd::python {
namespace {

using Clock = std::chrono::steady_clock;

// python3 -c BOOTSTRAP 3 4 5: reads the two modules from the socket (fd 3),
// installs them, and runs the worker; always ends with os._exit so threads
// the user's code left running cannot keep the process alive.
constexpr const char* kBootstrap = R"(import os, sys, socket, types, json
s = socket.socket(fileno=int(sys.argv[1]))
def _rd(n):
    b = s.recv(n, socket.MSG_WAITALL) if n else b''
    if len(b) < n:
        os._exit(0)
    return b
_src = json.loads(_rd(int.from_bytes(_rd(4), 'little')))
try:
    for _name in ('triton_python_backend_utils', 'inferd_python_worker'):
        _m = types.ModuleType(_name)
        _m.__file__ = '<inferd>/' + _name + '.py'
        sys.modules[_name] = _m
        exec(compile(_src[_name], _m.__file__, 'exec'), _m.__dict__)
except BaseException as _e:
    import traceback
    _msg = json.dumps({'type': 'init_error', 'message': 'the Python worker cannot start on ' + sys.executable +
                       ': ' + ''.join(traceback.format_exception_only(type(_e), _e)).strip()}).encode()
    s.sendall(len(_msg).to_bytes(4, 'little') + _msg)
    os._exit(1)
_fds = (int(sys.argv[2]), int(sys.argv[3]))
del sys.argv[1:]
try:
    sys.modules['inferd_python_worker'].main(s, *_fds)
finally:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)
)";

std::string SourcesMessage() {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("triton_python_backend_utils");
  w.String(kPbUtilsSource);
  w.Key("inferd_python_worker");
  w.String(kWorkerSource);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

std::string Seconds(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

}  // namespace

Result<std::shared_ptr<PythonWorker>> PythonWorker::Spawn(std::shared_ptr<const ModelSetup> setup) {
  std::shared_ptr<PythonWorker> w(new PythonWorker());
  w->setup_ = setup;
  const size_t initial = std::min<uint64_t>(1u << 20, setup->shm_limit);
  INFERD_ASSIGN_OR_RETURN(SharedRegion to_worker, SharedRegion::Create("inferd-python-in", initial, setup->shm_limit));
  INFERD_ASSIGN_OR_RETURN(w->to_server_, SharedRegion::Create("inferd-python-out", initial, setup->shm_limit));
  WorkerProcess::Options o;
  o.executable = setup->python;
  o.args = {"-c", kBootstrap, "3", "4", "5"};
  const std::string threads = std::to_string(std::max(1, setup->threads));
  o.env = {{"OMP_NUM_THREADS", threads},     {"OPENBLAS_NUM_THREADS", threads}, {"MKL_NUM_THREADS", threads},
           {"NUMEXPR_NUM_THREADS", threads}, {"PYTHONDONTWRITEBYTECODE", "1"},  {"PYTHONUNBUFFERED", "1"}};
  o.pass_fds = {to_worker.fd(), w->to_server_.fd()};
  INFERD_ASSIGN_OR_RETURN(w->process_, WorkerProcess::Spawn(o));
  {
    MutexLock lock(&w->mu_);
    w->to_worker_ = std::move(to_worker);
  }
  Status st = w->process_->Send(SourcesMessage());
  if (!st.ok()) return w->Break(st, "start", w->setup_->init_timeout);
  return w;
}

Status PythonWorker::SendInit(const InitMessage& init) {
  Status st = process_->Send(EncodeInit(init));
  return st.ok() ? st : Break(st, "initialize()", setup_->init_timeout);
}

Result<std::shared_ptr<PythonWorker>> PythonWorker::Start(std::shared_ptr<const ModelSetup> setup, int instance) {
  INFERD_ASSIGN_OR_RETURN(auto w, Spawn(setup));
  w->label_ = "model '" + setup->model_name + "' version " + setup->version + " instance " + std::to_string(instance);
  InitMessage init;
  init.model_file = setup->model_file;
  init.version_dir = setup->version_dir;
  init.shm_limit = setup->shm_limit;
  init.args = {{"model_config", setup->config_json},
               {"model_instance_kind", "CPU"},
               {"model_instance_name", setup->model_name + "_0_" + std::to_string(instance)},
               {"model_instance_device_id", "0"},
               {"model_repository", setup->model_dir},
               {"model_version", setup->version},
               {"model_name", setup->model_name}};
  // A worker that cannot start (no numpy) says why and exits, maybe before
  // it reads init: its message is read even when sending init failed.
  Status sent = w->process_->Send(EncodeInit(init));
  auto m = w->Next(Clock::now() + (sent.ok() ? setup->init_timeout : std::chrono::milliseconds(1000)));
  if (!m.ok()) return w->Break(sent.ok() ? m.status() : sent, "initialize()", w->setup_->init_timeout);
  if (m->kind == WorkerMessage::Kind::kInitError) {
    w->process_->WaitExit(Clock::now() + std::chrono::seconds(5));
    w->broken_ = true;
    return Status::InvalidArgument("model.py: initialize failed: " + m->text);
  }
  if (m->kind != WorkerMessage::Kind::kReady)
    return w->Break(Status::Internal("unexpected message during initialize()"), "initialize()",
                    w->setup_->init_timeout);
  return w;
}

Result<std::pair<std::string, bool>> PythonWorker::AutoCompleteConfig(const ModelSetup& setup) {
  auto shared = std::make_shared<ModelSetup>(setup);
  INFERD_ASSIGN_OR_RETURN(auto w, Spawn(shared));
  w->label_ = "model '" + setup.model_name + "' (auto-complete)";
  InitMessage init;
  init.model_file = setup.model_file;
  init.version_dir = setup.version_dir;
  init.shm_limit = setup.shm_limit;
  init.auto_complete = true;
  init.args = {{"model_config", setup.config_json}};
  INFERD_RETURN_IF_ERROR(w->SendInit(init));
  auto m = w->Next(Clock::now() + setup.init_timeout);
  if (!m.ok()) return w->Break(m.status(), "auto_complete_config()", w->setup_->init_timeout);
  w->process_->WaitExit(Clock::now() + std::chrono::seconds(5));
  w->broken_ = true;
  if (m->kind == WorkerMessage::Kind::kInitError)
    return Status::InvalidArgument("model.py: auto_complete_config failed: " + m->text);
  if (m->kind != WorkerMessage::Kind::kConfig)
    return Status::Internal("unexpected message from the Python worker during auto_complete_config()");
  return std::make_pair(m->config_json, m->config_defined);
}

PythonWorker::~PythonWorker() {
  if (process_ && !stopped_ && !broken_) Stop();  // no process_: its spawn failed
}

Status PythonWorker::Break(const Status& why, const std::string& during, std::chrono::milliseconds limit) {
  broken_ = true;
  std::string what;
  if (why.code() == StatusCode::kDeadlineExceeded) {
    process_->Kill();
    process_->WaitExit(Clock::now() + std::chrono::seconds(10));
    return Status::DeadlineExceeded(label_ + ": " + during + " did not return within " + Seconds(limit) +
                                    "; the Python worker (pid " + std::to_string(process_->pid()) +
                                    ") was killed and starts again for the next request");
  }
  if (why.code() == StatusCode::kUnavailable) {
    // The socket closed: the process ended; give it a moment to be reaped.
    if (!process_->WaitExit(Clock::now() + std::chrono::seconds(5))) {
      process_->Kill();
      process_->WaitExit(Clock::now() + std::chrono::seconds(10));
    }
    return Status::Internal(label_ + ": the Python worker (pid " + std::to_string(process_->pid()) + ") " +
                            process_->ExitDescription() + " during " + during +
                            "; it starts again for the next request");
  }
  process_->Kill();
  process_->WaitExit(Clock::now() + std::chrono::seconds(10));
  return Status::Internal(label_ + ": " + why.message() + " (during " + during +
                          "); the Python worker was killed and starts again for the next request");
}

Result<WorkerMessage> PythonWorker::Next(WorkerProcess::Deadline deadline) {
  for (;;) {
    INFERD_ASSIGN_OR_RETURN(std::string frame, process_->Receive(deadline));
    INFERD_ASSIGN_OR_RETURN(WorkerMessage m, ParseWorkerMessage(frame));
    if (m.out_size) INFERD_RETURN_IF_ERROR(to_server_.Follow(*m.out_size));
    if (m.kind != WorkerMessage::Kind::kLog) return m;
    if (m.level == "error")
      spdlog::error("{}: {}", label_, m.text);
    else if (m.level == "warn")
      spdlog::warn("{}: {}", label_, m.text);
    else if (m.level == "verbose")
      spdlog::debug("{}: {}", label_, m.text);
    else
      spdlog::info("{}: {}", label_, m.text);
  }
}

std::vector<Result<std::vector<Tensor>>> PythonWorker::Execute(const std::vector<const InferRequest*>& requests,
                                                               const std::vector<PartialSender>& partial) {
  std::vector<Result<std::vector<Tensor>>> results(requests.size(), Status::Internal("not run"));
  if (broken_) {
    for (auto& r : results) r = Status::Unavailable(label_ + ": the Python worker is not running");
    return results;
  }
  std::vector<RequestToSend> sent;
  std::vector<size_t> sent_index;  // sent[k] is requests[sent_index[k]]
  uint64_t in_size = 0;
  {
    MutexLock lock(&mu_);
    to_worker_.Reset();
    for (size_t i = 0; i < requests.size(); ++i) {
      const InferRequest& req = *requests[i];
      RequestToSend r;
      r.id = req.id;
      r.parameters = &req.parameters;
      for (const auto& o : req.outputs) r.outputs.push_back(o.name);
      Status st;
      for (size_t k = 0; k < req.inputs.size() && st.ok(); ++k) {
        const Tensor& t = req.inputs[k];
        auto at = to_worker_.Allocate(t.byte_size);
        if (!at.ok()) {
          st = at.status();
          break;
        }
        if (t.byte_size) std::memcpy(to_worker_.data() + *at, t.data, t.byte_size);
        r.inputs.push_back(TensorDesc{k < setup_->input_names.size() ? setup_->input_names[k] : t.name, t.dtype,
                                      t.shape, *at, t.byte_size});
      }
      if (!st.ok()) {
        results[i] = st;
        continue;
      }
      sent.push_back(std::move(r));
      sent_index.push_back(i);
    }
    in_size = to_worker_.size();
  }
  if (sent.empty()) return results;
  // BLS calls made while these run are traced under their caller's spans.
  bls_callers_.clear();
  for (size_t i : sent_index) bls_callers_.push_back(requests[i]->trace);
  struct ClearCallers {
    std::vector<std::shared_ptr<const TraceParent>>* v;
    ~ClearCallers() { v->clear(); }
  } clear_callers{&bls_callers_};
  auto fail_sent = [&](const Status& st) {
    for (size_t i : sent_index) results[i] = st;
    return results;
  };
  Status st = process_->Send(EncodeExecute(setup_->model_name, in_size, sent, setup_->decoupled));
  if (!st.ok()) return fail_sent(Break(st, "execute()", setup_->execute_timeout));
  const auto deadline = Clock::now() + setup_->execute_timeout;
  if (setup_->decoupled) {
    std::vector<PartialSender> sent_partial;
    for (size_t i : sent_index) sent_partial.push_back(i < partial.size() ? partial[i] : PartialSender());
    CollectDecoupled(sent_index, sent_partial, deadline, &results);
    return results;
  }
  for (;;) {
    auto m = Next(deadline);
    if (!m.ok()) return fail_sent(Break(m.status(), "execute()", setup_->execute_timeout));
    switch (m->kind) {
      case WorkerMessage::Kind::kBls:
        HandleBls(m->bls);
        continue;
      case WorkerMessage::Kind::kExecuteError:
        return fail_sent(Status::Internal("model.py: execute raised " + m->text));
      case WorkerMessage::Kind::kResponses: {
        if (m->answers.size() != sent.size())
          return fail_sent(Break(Status::Internal("answered " + std::to_string(m->answers.size()) + " of " +
                                                  std::to_string(sent.size()) + " requests"),
                                 "execute()", setup_->execute_timeout));
        for (size_t k = 0; k < sent.size(); ++k) results[sent_index[k]] = CopyOutputs(m->answers[k]);
        return results;
      }
      default:
        return fail_sent(
            Break(Status::Internal("unexpected message during execute()"), "execute()", setup_->execute_timeout));
    }
  }
}

Result<std::vector<Tensor>> PythonWorker::CopyOutputs(const Result<std::vector<TensorDesc>>& answer) {
  if (!answer.ok()) return answer.status();
  std::vector<Tensor> outputs;
  for (const TensorDesc& d : *answer) {
    INFERD_ASSIGN_OR_RETURN(Tensor t, CopyTensor(d, to_server_.bytes()));
    outputs.push_back(std::move(t));
  }
  return outputs;
}

void PythonWorker::CollectDecoupled(const std::vector<size_t>& sent_index, const std::vector<PartialSender>& partial,
                                    WorkerProcess::Deadline deadline,
                                    std::vector<Result<std::vector<Tensor>>>* results) {
  const size_t n = sent_index.size();
  std::vector<bool> done(n, false);
  // Without a sender (a unary call), one response may be held for the end;
  // a second one is an error, reported when the request ends.
  std::vector<std::optional<std::vector<Tensor>>> held(n);
  std::vector<Status> failed(n);
  size_t open = n;
  bool executed = false;
  auto finish = [&](size_t k, Result<std::vector<Tensor>> r) {
    if (done[k]) return;
    done[k] = true;
    --open;
    (*results)[sent_index[k]] = failed[k].ok() ? std::move(r) : Result<std::vector<Tensor>>(failed[k]);
  };
  while (!executed || open > 0) {
    auto m = Next(deadline);
    if (!m.ok()) {
      Status why =
          Break(m.status(), executed ? "the responses of a decoupled execute()" : "execute()", setup_->execute_timeout);
      for (size_t k = 0; k < n; ++k) finish(k, why);
      return;
    }
    switch (m->kind) {
      case WorkerMessage::Kind::kBls:
        HandleBls(m->bls);
        continue;
      case WorkerMessage::Kind::kExecuted:
        executed = true;
        continue;
      case WorkerMessage::Kind::kExecuteError:
        for (size_t k = 0; k < n; ++k) finish(k, Status::Internal("model.py: execute raised " + m->text));
        return;
      case WorkerMessage::Kind::kResponse: {
        const size_t k = m->request;
        if (k >= n || done[k]) {
          Status why =
              Break(Status::Internal("a response to a request that is not open"), "execute()", setup_->execute_timeout);
          for (size_t j = 0; j < n; ++j) finish(j, why);
          return;
        }
        auto outputs = CopyOutputs(m->answers[0]);
        if (!outputs.ok()) {  // an error response ends its request
          finish(k, outputs.status());
          continue;
        }
        if (m->final && outputs->empty() && held[k]) {
          finish(k, std::move(*held[k]));
          continue;
        }
        if (m->final && !held[k]) {
          finish(k, std::move(*outputs));
          continue;
        }
        if (!m->final && k < partial.size() && partial[k]) {
          partial[k](std::move(*outputs));
          continue;
        }
        if (!held[k] && !m->final) {
          held[k] = std::move(*outputs);
          continue;
        }
        failed[k] = Status::InvalidArgument(
            "model '" + setup_->model_name +
            "' is decoupled and sent more than one response: call it over gRPC ModelStreamInfer or "
            "POST /v2/models/{m}/generate_stream to receive them");
        if (m->final) finish(k, failed[k]);
        continue;
      }
      default: {
        Status why =
            Break(Status::Internal("unexpected message during execute()"), "execute()", setup_->execute_timeout);
        for (size_t k = 0; k < n; ++k) finish(k, why);
        return;
      }
    }
  }
}

void PythonWorker::HandleBls(const BlsCall& call) {
  auto req = std::make_unique<InferRequest>();
  req->model_name = call.model;
  req->model_version = call.version;
  req->id = call.request_id;
  req->parameters = call.parameters;
  req->timeout_us = call.timeout_us;
  // Its caller's trace: the request named by trace=request.trace(), or the one request being executed.
  if (call.trace_index >= 0 && static_cast<size_t>(call.trace_index) < bls_callers_.size()) {
    req->trace = bls_callers_[static_cast<size_t>(call.trace_index)];
  } else if (call.trace_index < 0 && bls_callers_.size() == 1) {
    req->trace = bls_callers_.front();
  }
  for (const auto& name : call.outputs) req->outputs.push_back(RequestedOutput{name});
  for (const TensorDesc& d : call.inputs) {
    auto t = CopyTensor(d, to_server_.bytes());
    if (!t.ok()) return AnswerBls(call.id, t.status());
    req->inputs.push_back(std::move(*t));
  }
  if (setup_->submitter == nullptr)
    return AnswerBls(call.id, Status::Unavailable("BLS: no server to call model '" + call.model + "' in"));
  std::weak_ptr<PythonWorker> weak = weak_from_this();
  ResponseSink sink;
  sink.final = [weak, id = call.id](Result<InferResponse> r) {
    if (auto w = weak.lock()) w->AnswerBls(id, std::move(r));
  };
  if (!call.decoupled) return setup_->submitter->Submit(std::move(req), std::move(sink.final));
  sink.partial = [weak, id = call.id](InferResponse r) {
    auto w = weak.lock();
    if (!w || w->broken()) return false;
    w->AnswerBls(id, std::move(r), /*final=*/false);
    return true;
  };
  setup_->submitter->SubmitStream(std::move(req), std::move(sink));
}

void PythonWorker::AnswerBls(uint64_t id, Result<InferResponse> result, bool final) {
  if (broken_) return;
  MutexLock lock(&mu_);
  Status st = result.status();
  std::vector<TensorDesc> outputs;
  if (result.ok()) {
    for (const Tensor& t : result->outputs) {
      auto at = to_worker_.Allocate(t.byte_size);
      if (!at.ok()) {
        st = at.status();
        outputs.clear();
        break;
      }
      if (t.byte_size) std::memcpy(to_worker_.data() + *at, t.data, t.byte_size);
      outputs.push_back(TensorDesc{t.name, t.dtype, t.shape, *at, t.byte_size});
    }
  }
  // Sent under mu_ on purpose: the message names offsets in to_worker_ and the
  // region's size, which the next allocation under mu_ may grow (remap); the
  // worker must get them in that order. Send is bounded (its send timeout).
  (void)process_->Send(EncodeBlsResult(id, to_worker_.size(), st, outputs, final));  // a failure shows on the next read
}

void PythonWorker::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (broken_) return;
  broken_ = true;  // no more BLS answers
  const auto deadline = Clock::now() + setup_->finalize_timeout;
  if (process_->Send(EncodeFinalize()).ok()) {
    for (;;) {
      auto m = Next(deadline);
      if (!m.ok()) break;
      if (m->kind != WorkerMessage::Kind::kFinalized) continue;
      if (!m->text.empty()) spdlog::warn("{}: finalize raised {}", label_, m->text);
      break;
    }
  }
  if (!process_->WaitExit(deadline)) {
    spdlog::warn("{}: the Python worker (pid {}) did not end within {} of finalize; killed", label_, process_->pid(),
                 Seconds(setup_->finalize_timeout));
    process_->Kill();
    process_->WaitExit(Clock::now() + std::chrono::seconds(10));
  }
}

}  // namespace inferd::python
