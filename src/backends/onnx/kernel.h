// Kernels: what a graph node compiles to. An op's builder reads the node
// once at load (attributes, constant inputs, opset, inferred types) and
// returns a Kernel that only computes; nothing is re-parsed per call.
//
// Contract for builders:
//  - Kernels never modify their inputs (values are shared between consumers)
//    and may be called concurrently (a model's instances share one plan):
//    keep per-call state on the stack.
//  - Errors are Status values naming the node (NodeInfo::Where()); ATen's
//    exceptions are caught by the plan.
//  - An unsupported attribute value fails the build, never computes
//    something else.
// Thread-safety: NodeInfo is used on the loading thread only.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/onnx/value.h"
#include "core/status.h"

namespace inferd::onnxexec {

// Inputs: explicit inputs in node order (nullptr = absent optional input),
// then the builder's implicit inputs. Outputs: one per node output.
using Kernel = std::function<Status(const std::vector<const Value*>& in, std::vector<Value>& out)>;

struct Compiled {
  Kernel kernel;
  // Values of enclosing graphs a subgraph reads (If, Loop, Scan): appended
  // to the kernel's inputs by the enclosing plan.
  std::vector<std::string> implicit_inputs;
  // false for random ops: never folded at load.
  bool deterministic = true;
  // Graph inputs whose gradients the kernel asks for (the Gradient op): the
  // plan runs with autograd on and these inputs requiring gradients.
  std::vector<std::string> grad_inputs;
  // Inputs the builder took from their load-time constants and the kernel
  // never reads (pre-packed weights): the plan passes nothing for them, so
  // the original constants can be freed.
  std::vector<size_t> baked_inputs;
};

// What the graph's declarations (value_info, inputs, outputs) say about a value.
struct StaticInfo {
  int32_t elem_type = 0;                      // onnx::TensorProto_DataType; 0 unknown
  std::optional<std::vector<int64_t>> shape;  // -1 = unknown dimension
};

class Plan;
class NodeInfo;
class OpRegistry;

// What builders replaced by reduced-precision kernels (ops/int8_ops.cc),
// counted over one model's compile (the loading thread's).
struct QuantizationTally {
  int layers = 0;
  int64_t float_bytes = 0;  // the weights' FP32 bytes
  int64_t int8_bytes = 0;   // what replaced them (values, scales, sums)
};

struct CompileContext {
  const OpRegistry* ops = nullptr;
  QuantizationTally* quantization = nullptr;    // null: nobody counts
  std::unordered_map<std::string, int> opsets;  // domain ("" = ai.onnx) -> version
  std::unordered_map<std::string, StaticInfo> infos;
};

// Names visible from enclosing graphs (for subgraphs).
class Scope {
 public:
  virtual ~Scope() = default;
  virtual bool Has(const std::string& name) const = 0;
};

class NodeInfo {
 public:
  NodeInfo(const onnx::NodeProto& proto, int opset, const CompileContext& ctx, const Scope& scope,
           std::vector<const Value*> constants, std::vector<StaticInfo> in_info, std::vector<StaticInfo> out_info)
      : proto_(proto),
        opset_(opset),
        ctx_(ctx),
        scope_(scope),
        constants_(std::move(constants)),
        in_info_(std::move(in_info)),
        out_info_(std::move(out_info)) {}

  const onnx::NodeProto& proto() const { return proto_; }
  const std::string& op() const { return proto_.op_type(); }
  int opset() const { return opset_; }
  // "node 'conv1' (Conv, opset 13)"
  std::string Where() const;
  Status Error(const std::string& what) const { return Status::InvalidArgument(Where() + ": " + what); }

  size_t num_inputs() const { return static_cast<size_t>(proto_.input_size()); }
  size_t num_outputs() const { return static_cast<size_t>(proto_.output_size()); }
  bool has_input(size_t i) const { return i < num_inputs() && !proto_.input(static_cast<int>(i)).empty(); }
  bool has_output(size_t i) const { return i < num_outputs() && !proto_.output(static_cast<int>(i)).empty(); }
  // The input's value when it is known at load (initializer, folded constant).
  const Value* constant(size_t i) const { return i < constants_.size() ? constants_[i] : nullptr; }
  const StaticInfo& input_info(size_t i) const;
  const StaticInfo& output_info(size_t i) const;

  // Attributes.
  bool Has(const std::string& name) const { return Find(name) != nullptr; }
  int64_t Int(const std::string& name, int64_t fallback) const;
  float Float(const std::string& name, float fallback) const;
  std::string String(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> Ints(const std::string& name) const;
  std::vector<float> Floats(const std::string& name) const;
  std::vector<std::string> Strings(const std::string& name) const;
  Result<Value> TensorAttr(const std::string& name) const;
  const onnx::AttributeProto* Find(const std::string& name) const;

  // Counts a weight replaced at load (no-op when the compile counts nothing).
  void CountQuantized(int64_t float_bytes, int64_t int8_bytes) const {
    if (!ctx_.quantization) return;
    ++ctx_.quantization->layers;
    ctx_.quantization->float_bytes += float_bytes;
    ctx_.quantization->int8_bytes += int8_bytes;
  }

  // Compiles a graph attribute (If's branches, Loop's body). Its free
  // names are resolved in this graph's scope; they come back in
  // `captured` and must be the kernel's implicit inputs, in that order.
  Result<std::shared_ptr<const Plan>> Subgraph(const std::string& attr, std::vector<std::string>* captured) const;

 private:
  const onnx::NodeProto& proto_;
  int opset_;
  const CompileContext& ctx_;
  const Scope& scope_;
  std::vector<const Value*> constants_;
  std::vector<StaticInfo> in_info_;
  std::vector<StaticInfo> out_info_;
};

using Builder = std::function<Result<Compiled>(const NodeInfo&)>;

// Op builders by domain and type. Filled at start-up by the Register*Ops
// functions (ops/*.cc), read-only afterwards.
class OpRegistry {
 public:
  void Add(const std::string& domain, const std::string& op, Builder b) { builders_[{domain, op}] = std::move(b); }
  const Builder* Find(const std::string& domain, const std::string& op) const {
    auto it = builders_.find({domain == "ai.onnx" ? "" : domain, op});
    return it == builders_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> Ops(const std::string& domain) const;

 private:
  std::map<std::pair<std::string, std::string>, Builder> builders_;
};

// Every op the executor implements. `optimized`: Conv, MaxPool, MatMul and
// Gemm use oneDNN kernels on weights packed at load (ops/mkldnn.cc) and the
// fused ops of fusion.h exist; false gives the plain ATen kernels only.
// `winograd`: 3x3 stride-1 convolutions may run as Winograd convolutions
// (faster, 1.8-4x the weights' memory; ops/dnnl_conv.h). `int8` (with
// `optimized`): MatMul, Gemm and Linear on constant float weights run as
// int8 products (ops/int8_ops.cc).
std::unique_ptr<OpRegistry> MakeOpRegistry(bool optimized = true, bool winograd = true, bool int8 = false);

}  // namespace inferd::onnxexec
