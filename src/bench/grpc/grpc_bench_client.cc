#include "bench/grpc/grpc_bench_client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <map>

#include "grpc_service.grpc.pb.h"

namespace inferd::bench {
namespace {

std::shared_ptr<grpc::Channel> OwnChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

std::string CallError(const grpc::Status& st) {
  return "gRPC " + std::to_string(st.error_code()) + ": " + st.error_message();
}

class GrpcSender final : public Sender {
 public:
  explicit GrpcSender(const std::string& target)
      : stub_(inference::GRPCInferenceService::NewStub(OwnChannel(target))) {}

  bool Send(const PreparedRequest& req, std::string* error) override {
    // Parsed once per prepared request: the load generator cycles a few.
    auto it = parsed_.find(&req);
    if (it == parsed_.end()) {
      inference::ModelInferRequest m;
      if (!m.ParseFromString(req.body)) {
        if (error->empty()) *error = "not a ModelInferRequest";
        return false;
      }
      it = parsed_.emplace(&req, std::move(m)).first;
    }
    grpc::ClientContext ctx;
    inference::ModelInferResponse resp;
    const grpc::Status st = stub_->ModelInfer(&ctx, it->second, &resp);
    if (!st.ok()) {
      if (error->empty()) *error = CallError(st);
      return false;
    }
    return true;
  }

 private:
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
  std::map<const PreparedRequest*, inference::ModelInferRequest> parsed_;
};

// One request in flight: the call's state, made anew for each call (a ClientContext serves one call).
struct Slot {
  size_t channel = 0;
  size_t next_request = 0;
  std::chrono::steady_clock::time_point start;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  grpc::ByteBuffer response;
  grpc::Status status;
};

void DriveClosedLoop(const std::string& target, int channels, const std::vector<PreparedRequest>& requests,
                     int concurrency, std::chrono::steady_clock::time_point t0, const std::atomic<bool>& stop,
                     const SampleSink& record) {
  const size_t n_channels = static_cast<size_t>(std::clamp(channels, 1, std::max(1, concurrency)));
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
  for (size_t i = 0; i < n_channels; ++i) stubs.push_back(std::make_unique<grpc::GenericStub>(OwnChannel(target)));
  std::vector<grpc::ByteBuffer> bodies;  // serialized once; a copy shares the slice
  for (const auto& r : requests) {
    grpc::Slice slice(r.body);
    bodies.emplace_back(&slice, 1);
  }
  grpc::CompletionQueue cq;
  std::vector<Slot> slots(static_cast<size_t>(concurrency));
  auto start = [&](Slot& s) {
    s.ctx = std::make_unique<grpc::ClientContext>();
    s.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    s.response.Clear();
    s.status = grpc::Status();
    s.start = std::chrono::steady_clock::now();
    const grpc::ByteBuffer& body = bodies[s.next_request++ % bodies.size()];
    s.reader = stubs[s.channel]->PrepareUnaryCall(s.ctx.get(), requests.front().path, body, &cq);
    s.reader->StartCall();
    s.reader->Finish(&s.response, &s.status, &s);
  };
  for (size_t i = 0; i < slots.size(); ++i) {
    slots[i].channel = i % n_channels;
    slots[i].next_request = i;
    start(slots[i]);
  }
  size_t in_flight = slots.size();
  void* tag = nullptr;
  bool ok = false;
  while (in_flight > 0 && cq.Next(&tag, &ok)) {
    Slot& s = *static_cast<Slot*>(tag);
    const auto end = std::chrono::steady_clock::now();
    const bool good = ok && s.status.ok();
    const std::string error = good ? std::string() : ok ? CallError(s.status) : "gRPC call failed";
    record({std::chrono::duration<double>(end - t0).count(),
            std::chrono::duration<double, std::micro>(end - s.start).count(), good},
           error);
    if (stop.load(std::memory_order_relaxed)) {
      --in_flight;
      continue;
    }
    start(s);
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
}

}  // namespace

ClosedLoopDriver GrpcClosedLoopDriver(std::string target, int channels) {
  return [target = std::move(target), channels](const std::vector<PreparedRequest>& requests, int concurrency,
                                                std::chrono::steady_clock::time_point t0, const std::atomic<bool>& stop,
                                                const SampleSink& record) {
    DriveClosedLoop(target, channels, requests, concurrency, t0, stop, record);
  };
}

PreparedRequest EncodeBenchRequest(const std::string& model, const std::string& version,
                                   const std::vector<Tensor>& inputs) {
  inference::ModelInferRequest m;
  m.set_model_name(model);
  m.set_model_version(version);
  for (const Tensor& t : inputs) {
    auto* in = m.add_inputs();
    in->set_name(t.name);
    in->set_datatype(std::string(DataTypeToWire(t.dtype)));
    in->mutable_shape()->Add(t.shape.begin(), t.shape.end());
    m.add_raw_input_contents()->assign(reinterpret_cast<const char*>(t.data), t.byte_size);
  }
  PreparedRequest r;
  r.path = "/inference.GRPCInferenceService/ModelInfer";
  r.body = m.SerializeAsString();
  return r;
}

SenderFactory GrpcSenderFactory(std::string target) {
  return [target = std::move(target)] { return std::make_unique<GrpcSender>(target); };
}

}  // namespace inferd::bench
