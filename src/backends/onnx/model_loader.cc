#include "backends/onnx/model_loader.h"

#include <onnx/checker.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "backends/onnx/fusion.h"
#include "backends/onnx/tensor_proto.h"

namespace inferd::onnxexec {
namespace {

// External data: <location> relative to the model's folder (never outside
// it), `offset` / `length` bytes; read into raw_data.
Status LoadExternal(onnx::TensorProto* t, const std::string& dir) {
  std::string location;
  uint64_t offset = 0;
  int64_t length = -1;
  for (const auto& kv : t->external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      if (kv.key() == "offset") offset = std::stoull(kv.value());
      if (kv.key() == "length") length = static_cast<int64_t>(std::stoull(kv.value()));
    } catch (const std::exception&) {
      return Status::InvalidArgument("tensor '" + t->name() + "': bad external_data " + kv.key());
    }
  }
  const std::filesystem::path rel(location);
  if (location.empty() || rel.is_absolute()) {
    return Status::InvalidArgument("tensor '" + t->name() + "': external data location must be a relative path");
  }
  for (const auto& part : rel)
    if (part == "..")
      return Status::InvalidArgument("tensor '" + t->name() + "': external data outside the model folder");
  const auto path = std::filesystem::path(dir) / rel;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("tensor '" + t->name() + "': external data file '" + path.string() + "' not found");
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  if (offset > size) return Status::InvalidArgument("tensor '" + t->name() + "': external data offset past the file");
  const uint64_t n = length < 0 ? size - offset : static_cast<uint64_t>(length);
  if (n > size - offset) return Status::InvalidArgument("tensor '" + t->name() + "': external data past the file");
  std::string data(n, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(data.data(), static_cast<std::streamsize>(n));
  if (!in) return Status::Internal("tensor '" + t->name() + "': cannot read external data");
  t->set_raw_data(std::move(data));
  t->clear_external_data();
  t->set_data_location(onnx::TensorProto::DEFAULT);
  return Status::OK();
}

Status LoadExternalIn(onnx::GraphProto* g, const std::string& dir) {
  for (auto& t : *g->mutable_initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL) INFERD_RETURN_IF_ERROR(LoadExternal(&t, dir));
  for (auto& n : *g->mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t() && a.t().data_location() == onnx::TensorProto::EXTERNAL) {
        INFERD_RETURN_IF_ERROR(LoadExternal(a.mutable_t(), dir));
      }
      if (a.has_g()) INFERD_RETURN_IF_ERROR(LoadExternalIn(a.mutable_g(), dir));
      for (auto& sub : *a.mutable_graphs()) INFERD_RETURN_IF_ERROR(LoadExternalIn(&sub, dir));
    }
  }
  return Status::OK();
}

IoInfo Describe(const onnx::ValueInfoProto& v) {
  IoInfo io;
  io.name = v.name();
  if (!v.type().has_tensor_type()) {
    io.is_tensor = false;
    return io;
  }
  const auto& t = v.type().tensor_type();
  io.elem_type = t.elem_type();
  if (t.has_shape()) {
    io.has_shape = true;
    for (const auto& d : t.shape().dim()) io.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  }
  return io;
}

void CollectInfos(const onnx::GraphProto& g, std::unordered_map<std::string, StaticInfo>* infos) {
  auto add = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type()) return;
    const IoInfo io = Describe(v);
    StaticInfo s;
    s.elem_type = io.elem_type;
    if (io.has_shape) s.shape = io.dims;
    (*infos)[v.name()] = s;
  };
  for (const auto& v : g.input()) add(v);
  for (const auto& v : g.output()) add(v);
  for (const auto& v : g.value_info()) add(v);
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectInfos(a.g(), infos);
      for (const auto& sub : a.graphs()) CollectInfos(sub, infos);
    }
}

}  // namespace

Result<OnnxModel> LoadOnnxModel(std::string_view bytes, const std::string& dir, const OpRegistry& ops, bool fuse) {
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return Status::InvalidArgument("ONNX model larger than 2 GiB: use external data files");
  }
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::InvalidArgument("not an ONNX model (the protobuf does not parse)");
  }
  if (!model.has_graph()) return Status::InvalidArgument("the ONNX model has no graph");
  INFERD_RETURN_IF_ERROR(LoadExternalIn(model.mutable_graph(), dir));
  CompileContext ctx;
  ctx.ops = &ops;
  OnnxModel out;
  for (const auto& o : model.opset_import()) {
    const std::string domain = o.domain() == "ai.onnx" ? "" : o.domain();
    if (domain == kInferdDomain) {
      return Status::InvalidArgument(std::string("the model imports domain ") + kInferdDomain +
                                     ", which is inferd's own (fused nodes)");
    }
    ctx.opsets[domain] = static_cast<int>(o.version());
  }
  if (model.ir_version() < 3) ctx.opsets.emplace("", 1);  // before opset_import existed
  auto def = ctx.opsets.find("");
  out.opset = def == ctx.opsets.end() ? 0 : def->second;
  if (def != ctx.opsets.end() && (out.opset < kMinOpset || out.opset > kMaxOpset)) {
    return Status::Unimplemented("the model uses ONNX opset " + std::to_string(out.opset) + "; inferd runs opsets " +
                                 std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset));
  }
  out.producer = model.producer_name() + (model.producer_version().empty() ? "" : " " + model.producer_version());
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (msg.size() > 600) msg = msg.substr(0, 600) + "...";
    return Status::InvalidArgument("invalid ONNX model: " + msg);
  }
  // ONNX's shape inference is not run: libonnx 1.12 dereferences null on
  // some malformed graphs (fuzz_onnx_model: LayerNormalization on a rank-0
  // input), and the executor needs no inferred shapes; what the graph
  // declares (inputs, outputs, value_info) is used.
  const FusionCounts fused = fuse ? FuseNodes(&model) : FusionCounts{};
  out.fused = fused.total();
  if (out.fused > 0) ctx.opsets[kInferdDomain] = 1;
  CollectInfos(model.graph(), &ctx.infos);
  ctx.quantization = &out.quantized;
  INFERD_ASSIGN_OR_RETURN(out.plan, Plan::Compile(model.graph(), ctx, nullptr));
  std::unordered_map<std::string, const onnx::ValueInfoProto*> declared;
  for (const auto& v : model.graph().input()) declared[v.name()] = &v;
  for (const auto& name : out.plan->input_names()) out.inputs.push_back(Describe(*declared.at(name)));
  for (const auto& v : model.graph().output()) out.outputs.push_back(Describe(v));
  return out;
}

Result<OnnxModel> LoadOnnxModelFile(const std::string& path, const OpRegistry& ops, bool fuse) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = std::move(ss).str();
  return LoadOnnxModel(bytes, std::filesystem::path(path).parent_path().string(), ops, fuse);
}

}  // namespace inferd::onnxexec
