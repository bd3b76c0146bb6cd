#include "bench/grpc/grpc_bench_client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

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

}  // namespace

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
