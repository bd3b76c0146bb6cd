// StoredOutputs: a model's outputs as a prediction table holds them (one
// cell per output, as a batch job writes them: a scalar for one element, a
// JSON array of the row's elements otherwise) and back: hybrid serving
// answers a request from a stored row and writes an online answer back.
//
// The cells become tensors the way a job's source cells become inputs
// (RowEncoder), with the output's datatype and dims (a batched model's
// answers get the batch dimension 1); rule outputs take the rule's.
//
// Thread-safety: immutable after Make; the methods are const.
#pragma once

#include <string>
#include <vector>

#include "core/infer_request.h"
#include "core/model_spec.h"
#include "jobs/cell.h"
#include "jobs/row_encoder.h"

namespace inferd::jobs {

class StoredOutputs {
 public:
  // INVALID_ARGUMENT when `outputs` names something `model` does not declare
  // (outputs and rule outputs), or an output has more than one variable dimension.
  static Result<StoredOutputs> Make(const ModelSpec& model, const std::vector<std::string>& outputs);

  const std::vector<std::string>& names() const { return names_; }
  // The tensors of one stored row (`cells`: one per name, in order).
  // INVALID_ARGUMENT naming the output when a cell does not fit its output
  // (NULL, wrong element count, not a number): the row cannot answer.
  Result<std::vector<Tensor>> ToTensors(const std::vector<Cell>& cells) const;
  // The cells of a one-row answer, to store. INTERNAL when it lacks an output.
  Result<std::vector<Cell>> ToCells(const InferResponse& response) const;

 private:
  explicit StoredOutputs(RowEncoder encoder, std::vector<std::string> names)
      : encoder_(std::move(encoder)), names_(std::move(names)) {}
  RowEncoder encoder_;  // over a model whose inputs are the stored outputs
  std::vector<std::string> names_;
};

}  // namespace inferd::jobs
