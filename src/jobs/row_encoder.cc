#include "jobs/row_encoder.h"

#include <rapidjson/document.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "core/number_text.h"

namespace inferd::jobs {
namespace {

class ElementWriter {
 public:
  ElementWriter(std::string* out, DataType dt) : out_(out), dt_(dt) {}
  int64_t count() const { return count_; }

  // One JSON value: a number, a string (BYTES) or an array of them (flattened).
  Status Json(const rapidjson::Value& v, int depth = 0) {
    if (depth > 32) return Status::InvalidArgument("JSON array nested deeper than 32 levels");
    if (v.IsArray()) {
      for (const auto& e : v.GetArray()) INFERD_RETURN_IF_ERROR(Json(e, depth + 1));
      return Status::OK();
    }
    if (dt_ == DataType::kBytes) {
      if (!v.IsString()) return Status::InvalidArgument("a BYTES element must be a JSON string");
      return Text(std::string_view(v.GetString(), v.GetStringLength()));
    }
    if (v.IsBool() && dt_ == DataType::kBool) return Number(true, v.GetBool() ? 1 : 0, 0);
    if (v.IsInt64()) return Number(true, v.GetInt64(), 0);
    if (v.IsNumber()) return Number(false, 0, v.GetDouble());
    return Status::InvalidArgument("an array element is not a number");
  }
  Status Number(bool is_int, int64_t i, double d) {
    if (dt_ == DataType::kBytes) {
      char buf[32];
      if (is_int)
        std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(i));
      else
        std::snprintf(buf, sizeof buf, "%.17g", d);
      return Text(buf);
    }
    if (!AppendNumber(out_, dt_, is_int, i, d))
      return Status::InvalidArgument(std::string("a value does not fit ") + std::string(DataTypeToWire(dt_)));
    ++count_;
    return Status::OK();
  }
  Status Text(std::string_view s) {
    AppendBytesElement(out_, s);
    ++count_;
    return Status::OK();
  }

 private:
  std::string* out_;
  DataType dt_;
  int64_t count_ = 0;
};

Status AppendCell(const Cell& cell, const std::string& column, ElementWriter* w, DataType dt) {
  if (std::holds_alternative<std::monostate>(cell))
    return Status::InvalidArgument("column '" + column + "' is empty (NULL)");
  if (const auto* i = std::get_if<int64_t>(&cell)) return w->Number(true, *i, 0);
  if (const auto* d = std::get_if<double>(&cell)) return w->Number(false, 0, *d);
  if (const auto* a = std::get_if<NumberArray>(&cell)) {
    for (double v : a->values) {
      Status st = w->Number(false, 0, v);
      if (!st.ok()) return Status::InvalidArgument("column '" + column + "': " + st.message());
    }
    return Status::OK();
  }
  std::string_view text;
  bool json = false;
  if (const auto* s = std::get_if<std::string>(&cell)) {
    text = *s;
    json = !TrimSpace(text).empty() && TrimSpace(text).front() == '[';  // a JSON array in a text column
  } else {
    text = std::get<JsonText>(cell).text;
    json = true;
  }
  if (json) {
    rapidjson::Document doc;
    doc.Parse(text.data(), text.size());
    if (doc.HasParseError()) return Status::InvalidArgument("column '" + column + "' holds malformed JSON");
    Status st = w->Json(doc);
    if (!st.ok()) return Status::InvalidArgument("column '" + column + "': " + st.message());
    return Status::OK();
  }
  if (dt == DataType::kBytes) return w->Text(text);
  bool is_int = false;
  int64_t i = 0;
  double d = 0;
  if (dt == DataType::kBool) {
    const std::string_view t = TrimSpace(text);
    if (t == "true" || t == "True" || t == "TRUE") return w->Number(true, 1, 0);
    if (t == "false" || t == "False" || t == "FALSE") return w->Number(true, 0, 0);
  }
  if (!ParseNumber(text, &is_int, &i, &d)) {
    std::string shown(text.substr(0, 40));
    return Status::InvalidArgument("column '" + column + "' value '" + shown + "' is not a number");
  }
  Status st = w->Number(is_int, i, d);
  if (!st.ok()) return Status::InvalidArgument("column '" + column + "': " + st.message());
  return Status::OK();
}

void AppendNumberJson(std::string* out, double v, bool single) {
  if (!std::isfinite(v)) {
    *out += "null";
    return;
  }
  // The shortest text that reads back as the same float (FP32, FP16, BF16)
  // or double (FP64); std::to_chars is exact and much faster than printf.
  char buf[32];
  auto r =
      single ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(v)) : std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

// Element k of a numeric tensor, as an integer (integer types) or a real.
void ReadElement(const Tensor& t, int64_t k, bool* is_int, int64_t* i, double* d) {
  const std::byte* p = t.data + k * static_cast<int64_t>(DataTypeByteSize(t.dtype));
  auto get = [&](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  *is_int = true;
  switch (t.dtype) {
    case DataType::kBool:
    case DataType::kUint8:
      *i = get(uint8_t{});
      return;
    case DataType::kInt8:
      *i = get(int8_t{});
      return;
    case DataType::kInt16:
      *i = get(int16_t{});
      return;
    case DataType::kUint16:
      *i = get(uint16_t{});
      return;
    case DataType::kInt32:
      *i = get(int32_t{});
      return;
    case DataType::kUint32:
      *i = get(uint32_t{});
      return;
    case DataType::kInt64:
      *i = get(int64_t{});
      return;
    case DataType::kUint64:
      *i = static_cast<int64_t>(get(uint64_t{}));
      return;
    default:
      break;
  }
  *is_int = false;
  switch (t.dtype) {
    case DataType::kFp32:
      *d = get(float{});
      return;
    case DataType::kFp64:
      *d = get(double{});
      return;
    case DataType::kFp16:
      *d = HalfToFloat(get(uint16_t{}));
      return;
    case DataType::kBf16:
      *d = Bf16ToFloat(get(uint16_t{}));
      return;
    default:
      *d = 0;
  }
}

}  // namespace

Result<RowEncoder> RowEncoder::Make(const JobSpec& spec, const ModelSpec& model,
                                    const std::vector<std::string>& columns) {
  RowEncoder e;
  std::map<std::string, size_t, std::less<>> index;
  for (size_t i = 0; i < columns.size(); ++i) index.emplace(columns[i], i);
  auto column = [&](const std::string& name, const std::string& what) -> Result<size_t> {
    auto it = index.find(name);
    if (it == index.end()) {
      std::string known;
      for (size_t i = 0; i < columns.size() && i < 20; ++i) known += (i ? ", " : "") + columns[i];
      return Status::InvalidArgument("job spec: " + what + " names column '" + name +
                                     "', which the source does not have (columns: " + known +
                                     (columns.size() > 20 ? ", ..." : "") + ")");
    }
    return it->second;
  };
  INFERD_ASSIGN_OR_RETURN(e.key_column_, column(spec.key, "'key'"));
  e.batched_ = model.max_batch_size > 0;
  bool variable = false;
  for (const auto& im : spec.inputs) {
    const TensorSpec* ts = nullptr;
    for (const auto& in : model.inputs)
      if (in.name == im.tensor) ts = &in;
    if (!ts)
      return Status::InvalidArgument("job spec: 'inputs' names '" + im.tensor + "', which model '" + spec.model +
                                     "' does not take");
    Input in;
    in.tensor = im.tensor;
    in.dtype = ts->dtype;
    in.dims = ts->dims;
    in.elements = ts->any_rank ? -1 : ElementCount(ts->dims);
    int variable_dims = 0;
    for (int64_t d : in.dims) variable_dims += d < 0;
    if (ts->any_rank || variable_dims > 1)
      return Status::InvalidArgument("job spec: input '" + im.tensor + "' has more than one variable dimension (" +
                                     ShapeToString(in.dims) + "); a job needs at most one");
    if (variable_dims == 1) variable = true;
    for (const auto& c : im.columns) {
      INFERD_ASSIGN_OR_RETURN(size_t idx, column(c, "'inputs." + im.tensor + "'"));
      in.columns.push_back(idx);
      in.column_names.push_back(c);
    }
    e.inputs_.push_back(std::move(in));
  }
  for (const auto& in : model.inputs) {
    bool mapped = false;
    for (const auto& m : e.inputs_) mapped |= m.tensor == in.name;
    if (!mapped && !in.optional)
      return Status::InvalidArgument("job spec: model '" + spec.model + "' input '" + in.name +
                                     "' is not mapped to any column");
  }
  if (spec.outputs.empty()) {
    for (const auto& o : model.outputs) e.outputs_.push_back(o.name);
    for (const auto& r : model.rules) e.outputs_.push_back(r.name);  // the config's output rules too
  } else {
    for (const auto& name : spec.outputs) {
      // A model whose outputs were not declared (auto-completed) answers whatever it returns.
      bool known = model.outputs.empty();
      for (const auto& o : model.outputs) known |= o.name == name;
      for (const auto& r : model.rules) known |= r.name == name;
      if (!known)
        return Status::InvalidArgument("job spec: 'outputs' names '" + name + "', which model '" + spec.model +
                                       "' does not have");
      e.outputs_.push_back(name);
    }
  }
  if (e.outputs_.empty())
    return Status::InvalidArgument("job spec: model '" + spec.model +
                                   "' declares no outputs; name the ones to store in 'outputs'");
  if (!e.batched_ || variable) {
    e.rows_per_request_ = 1;
  } else {
    const int64_t want = spec.rows_per_request > 0 ? spec.rows_per_request : model.max_batch_size;
    e.rows_per_request_ = std::max<int64_t>(1, std::min<int64_t>(want, model.max_batch_size));
  }
  return e;
}

RowEncoder::Batch RowEncoder::NewBatch() const {
  Batch b;
  b.data.resize(inputs_.size());
  b.var_dim.assign(inputs_.size(), 0);
  return b;
}

Status RowEncoder::CheckMapping(const Row& row) const {
  for (const Input& in : inputs_) {
    if (in.elements < 0) continue;  // a variable dimension takes what a row gives
    std::string scratch;
    ElementWriter w(&scratch, in.dtype);
    bool parsed = true;
    for (size_t c = 0; c < in.columns.size() && parsed; ++c)
      parsed = in.columns[c] < row.cells.size() &&
               AppendCell(row.cells[in.columns[c]], in.column_names[c], &w, in.dtype).ok();
    if (!parsed || w.count() == in.elements) continue;
    std::string names;
    for (const auto& n : in.column_names) names += (names.empty() ? "" : ", ") + n;
    return Status::InvalidArgument("job spec: the columns mapped to input '" + in.tensor + "' (" + names + ") give " +
                                   std::to_string(w.count()) + " elements for the source's first row; its dims " +
                                   ShapeToString(in.dims) + " need " + std::to_string(in.elements));
  }
  return Status::OK();
}

Status RowEncoder::Append(const Row& row, Batch* batch) const {
  std::vector<size_t> sizes;
  for (const auto& d : batch->data) sizes.push_back(d.size());
  auto undo = [&] {
    for (size_t i = 0; i < sizes.size(); ++i) batch->data[i].resize(sizes[i]);
  };
  for (size_t k = 0; k < inputs_.size(); ++k) {
    const Input& in = inputs_[k];
    ElementWriter w(&batch->data[k], in.dtype);
    for (size_t c = 0; c < in.columns.size(); ++c) {
      Status st = AppendCell(row.cells[in.columns[c]], in.column_names[c], &w, in.dtype);
      if (!st.ok()) {
        undo();
        return Status::InvalidArgument("input '" + in.tensor + "': " + st.message());
      }
    }
    if (in.elements >= 0 && w.count() != in.elements) {
      undo();
      return Status::InvalidArgument("input '" + in.tensor + "' needs " + std::to_string(in.elements) +
                                     " elements (dims " + ShapeToString(in.dims) + "), the row gives " +
                                     std::to_string(w.count()));
    }
    if (in.elements < 0) {
      int64_t fixed = 1;
      for (int64_t d : in.dims)
        if (d >= 0) fixed *= d;
      if (fixed == 0 || w.count() % fixed != 0 || w.count() == 0) {
        undo();
        return Status::InvalidArgument("input '" + in.tensor + "' (dims " + ShapeToString(in.dims) + ") cannot take " +
                                       std::to_string(w.count()) + " elements");
      }
      batch->var_dim[k] = w.count() / fixed;
    }
  }
  ++batch->rows;
  return Status::OK();
}

std::unique_ptr<InferRequest> RowEncoder::ToRequest(Batch&& batch, const std::string& model,
                                                    const std::string& version) const {
  auto r = std::make_unique<InferRequest>();
  r->model_name = model;
  r->model_version = version;
  r->background = true;
  for (size_t k = 0; k < inputs_.size(); ++k) {
    const Input& in = inputs_[k];
    Shape shape;
    if (batched_) shape.push_back(batch.rows);
    for (int64_t d : in.dims) shape.push_back(d < 0 ? batch.var_dim[k] : d);
    auto buf = std::make_shared<const std::string>(std::move(batch.data[k]));
    r->inputs.push_back(Tensor::Own(in.tensor, in.dtype, std::move(shape), std::move(buf)));
  }
  for (const auto& o : outputs_) r->outputs.push_back(RequestedOutput{o});
  return r;
}

Result<std::vector<Cell>> RowEncoder::Decode(const InferResponse& response, int64_t i, int64_t rows) const {
  std::vector<Cell> cells;
  for (const auto& name : outputs_) {
    const Tensor* t = nullptr;
    for (const auto& o : response.outputs)
      if (o.name == name) t = &o;
    if (!t) return Status::Internal("the response lacks output '" + name + "'");
    const int64_t total = t->element_count();
    if (total < 0) return Status::Internal("output '" + name + "' has an invalid shape");
    int64_t per_row = total;
    if (batched_) {
      if (t->shape.empty() || t->shape[0] != rows)
        return Status::Internal("output '" + name + "' has shape " + ShapeToString(t->shape) + " for " +
                                std::to_string(rows) + " rows");
      per_row = rows > 0 ? total / rows : 0;
    }
    const int64_t first = batched_ ? i * per_row : 0;
    if (t->dtype == DataType::kBytes) {
      INFERD_ASSIGN_OR_RETURN(auto elems, SplitBytesElements(t->bytes()));
      if (static_cast<int64_t>(elems.size()) < first + per_row)
        return Status::Internal("output '" + name + "' is truncated");
      if (per_row == 1) {
        cells.emplace_back(std::string(elems[first]));
      } else {
        std::string json = "[";
        for (int64_t k = 0; k < per_row; ++k) {
          if (k) json += ',';
          json += JsonString(elems[first + k]);
        }
        json += ']';
        cells.emplace_back(JsonText{std::move(json)});
      }
      continue;
    }
    if (DataTypeByteSize(t->dtype) == 0 ||
        static_cast<size_t>(first + per_row) * DataTypeByteSize(t->dtype) > t->byte_size)
      return Status::Internal("output '" + name + "' is truncated");
    const bool single = t->dtype != DataType::kFp64;
    bool is_int = false;
    int64_t iv = 0;
    double dv = 0;
    if (per_row == 1) {
      ReadElement(*t, first, &is_int, &iv, &dv);
      if (is_int)
        cells.emplace_back(iv);
      else if (std::isfinite(dv))
        cells.emplace_back(dv);
      else
        cells.emplace_back(std::monostate{});
      continue;
    }
    std::string json = "[";
    for (int64_t k = 0; k < per_row; ++k) {
      if (k) json += ',';
      ReadElement(*t, first + k, &is_int, &iv, &dv);
      if (is_int)
        json += std::to_string(iv);
      else
        AppendNumberJson(&json, dv, single);
    }
    json += ']';
    cells.emplace_back(JsonText{std::move(json)});
  }
  return cells;
}

}  // namespace inferd::jobs
