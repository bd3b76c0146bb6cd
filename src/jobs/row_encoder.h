// RowEncoder: source rows -> a request's input tensors, and a response's
// output tensors -> cells to store, for one job on one model.
//
// Built against the model's config and the source's columns, so every name
// in the job's mapping is checked once, before any row is read. Each mapped
// column adds one element (a number, or a text for BYTES), or all elements of
// a JSON array (nested arrays flattened row-major); a row must give each
// input exactly the elements its dims hold, else that row is a row error.
//
// Thread-safety: immutable after Make; Encode/Decode are const.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/infer_request.h"
#include "core/model_spec.h"
#include "jobs/cell.h"
#include "jobs/job_spec.h"

namespace inferd::jobs {

class RowEncoder {
 public:
  // INVALID_ARGUMENT naming what does not match (a column the source lacks,
  // an input or output the model lacks, an input left unmapped).
  static Result<RowEncoder> Make(const JobSpec& spec, const ModelSpec& model, const std::vector<std::string>& columns);

  // Rows per request: the spec's, capped by max_batch_size; 1 for a model
  // that does not batch or has a variable dimension.
  int64_t rows_per_request() const { return rows_per_request_; }
  size_t key_column() const { return key_column_; }
  // The stored outputs, in order (the sink's value columns).
  const std::vector<std::string>& outputs() const { return outputs_; }

  // Appends one row's elements to `batch`. A row that does not fit (wrong
  // element count, a value that is not a number) answers INVALID_ARGUMENT
  // and leaves `batch` unchanged.
  struct Batch {
    std::vector<std::string> data;  // per input: bytes so far
    std::vector<int64_t> var_dim;   // per input: the variable dimension of its row (single-row requests)
    int64_t rows = 0;
  };
  Batch NewBatch() const;
  Status Append(const Row& row, Batch* batch) const;
  // Whether the mapping can fill the inputs, judged on one row of the source
  // (the first, at submit): INVALID_ARGUMENT when the columns mapped to an
  // input of fixed size give it another number of elements (3 columns for
  // dims [8]). A value that does not parse is not the mapping's fault (that
  // row is a row error when the job runs): OK then.
  Status CheckMapping(const Row& row) const;
  // The request for the rows appended so far.
  std::unique_ptr<InferRequest> ToRequest(Batch&& batch, const std::string& model, const std::string& version) const;

  // Row `i` of a response to a request of `rows` rows: one cell per stored
  // output (a scalar for a single element, else a JSON array of the row's
  // elements, flattened). INTERNAL when the response lacks an output or has
  // fewer rows.
  Result<std::vector<Cell>> Decode(const InferResponse& response, int64_t i, int64_t rows) const;

 private:
  struct Input {
    std::string tensor;
    DataType dtype = DataType::kInvalid;
    Shape dims;                   // without the batch dimension
    int64_t elements = 0;         // per row; -1 with a variable dimension
    std::vector<size_t> columns;  // source column indices
    std::vector<std::string> column_names;
  };
  std::vector<Input> inputs_;
  std::vector<std::string> outputs_;
  size_t key_column_ = 0;
  int64_t rows_per_request_ = 1;
  bool batched_ = false;
};

}  // namespace inferd::jobs
