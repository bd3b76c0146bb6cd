// Plan: an ONNX graph compiled for execution.
//
// Compile (once, at load) resolves every edge to a slot, builds each node's
// kernel through the op registry, folds nodes whose inputs are all known at
// load (constants, Shape of a static shape, ...) into constants, and works
// out after which step each intermediate value can be freed. Run executes
// the steps in order over a per-call slot array: nothing is planned per call,
// and intermediates are released as soon as their last consumer ran.
// Subgraphs (If, Loop, Scan) are plans of their own whose free names
// (`captured`) the enclosing node passes in.
// Thread-safety: a compiled Plan is immutable; Run may be called
// concurrently (each call has its own slots).
#pragma once

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/onnx/kernel.h"
#include "backends/onnx/value.h"
#include "core/status.h"

namespace inferd::onnxexec {

class Plan {
 public:
  // `outer` resolves names of enclosing graphs (nullptr at the top level).
  // INVALID_ARGUMENT naming the node for unknown inputs (missing
  // initializers, cycles), unsupported ops or attributes.
  static Result<std::shared_ptr<const Plan>> Compile(const onnx::GraphProto& graph, const CompileContext& ctx,
                                                     const Scope* outer);

  // Graph inputs the caller provides (initializers excluded), in order.
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  // Names of enclosing graphs this plan reads, in the order Run takes them.
  const std::vector<std::string>& captured() const { return captured_; }
  size_t num_steps() const { return steps_.size(); }
  size_t num_folded() const { return folded_; }

  // `inputs`: one per input_names() (an empty Value for an omitted
  // optional input), then one per captured().
  Status Run(std::vector<Value> inputs, std::vector<Value>* outputs) const;

 private:
  struct Step {
    Kernel kernel;
    std::vector<int> in;   // slots; -1 = absent
    std::vector<int> out;  // slots; -1 = discarded
    std::vector<int> release;
    std::string where;
  };
  std::vector<std::string> input_names_, output_names_, captured_;
  std::vector<int> input_slots_, output_slots_, captured_slots_;
  std::vector<std::pair<int, Value>> constants_;
  std::vector<int> grad_slots_;  // graph inputs that require gradients (Gradient op)
  std::vector<Step> steps_;
  size_t num_slots_ = 0;
  size_t folded_ = 0;

  friend class PlanBuilder;
};

}  // namespace inferd::onnxexec
