#include "jobs/stored_outputs.h"

namespace inferd::jobs {

Result<StoredOutputs> StoredOutputs::Make(const ModelSpec& model, const std::vector<std::string>& outputs) {
  // A model whose inputs are the stored outputs: RowEncoder turns a row's
  // cells into them, and decodes an answer's outputs into cells.
  ModelSpec as_inputs;
  as_inputs.name = model.name;
  as_inputs.max_batch_size = model.max_batch_size;
  JobSpec spec;
  spec.model = model.name;
  spec.key = "\x01key";  // a column name no output can have
  std::vector<std::string> columns{spec.key};
  for (const auto& name : outputs) {
    TensorSpec t;
    t.name = name;
    if (const TensorSpec* o = model.FindOutput(name)) {
      t.dtype = o->dtype;
      t.dims = o->dims;
      t.any_rank = o->any_rank;
    } else if (const OutputRule* r = model.FindRule(name)) {
      const TensorSpec* source = model.FindOutput(r->source);
      if (source == nullptr) return Status::InvalidArgument("rule '" + name + "' reads an undeclared output");
      t.dtype = r->dtype();
      t.dims = r->dims(source->dims);
    } else {
      return Status::InvalidArgument("model '" + model.name + "' has no output '" + name + "'");
    }
    as_inputs.inputs.push_back(t);
    as_inputs.outputs.push_back(t);
    spec.inputs.push_back(InputMapping{name, {name}});
    spec.outputs.push_back(name);
    columns.push_back(name);
  }
  auto encoder = RowEncoder::Make(spec, as_inputs, columns);
  if (!encoder.ok()) {
    std::string why = encoder.status().message();
    if (why.rfind("job spec: ", 0) == 0) why = why.substr(10);
    return Status::InvalidArgument("stored outputs of model '" + model.name + "': " + why);
  }
  return StoredOutputs(std::move(*encoder), outputs);
}

Result<std::vector<Tensor>> StoredOutputs::ToTensors(const std::vector<Cell>& cells) const {
  if (cells.size() != names_.size())
    return Status::InvalidArgument("a stored row has " + std::to_string(cells.size()) + " values for " +
                                   std::to_string(names_.size()) + " outputs");
  Row row;
  row.cells.reserve(cells.size() + 1);
  row.cells.emplace_back(std::string());
  for (const auto& c : cells) row.cells.push_back(c);
  RowEncoder::Batch batch = encoder_.NewBatch();
  if (Status st = encoder_.Append(row, &batch); !st.ok()) {
    std::string why = st.message();
    if (why.rfind("input '", 0) == 0) why = "stored output '" + why.substr(7);
    return Status::InvalidArgument(why);
  }
  std::unique_ptr<InferRequest> r = encoder_.ToRequest(std::move(batch), "", "");
  return std::move(r->inputs);
}

Result<std::vector<Cell>> StoredOutputs::ToCells(const InferResponse& response) const {
  return encoder_.Decode(response, 0, 1);
}

}  // namespace inferd::jobs
