#include "frontends/grpc/grpc_codec.h"

#include <cstring>
#include <limits>

namespace inferd::grpcfe {
namespace {

using google::protobuf::Map;
using google::protobuf::RepeatedField;
using inference::InferParameter;
using inference::InferTensorContents;

constexpr size_t kMaxDims = 32;

Status DecodeParameters(const Map<std::string, InferParameter>& in, Parameters* out, const std::string& where) {
  for (const auto& [key, p] : in) {
    switch (p.parameter_choice_case()) {
      case InferParameter::kBoolParam:
        (*out)[key] = p.bool_param();
        break;
      case InferParameter::kInt64Param:
        (*out)[key] = p.int64_param();
        break;
      case InferParameter::kDoubleParam:
        (*out)[key] = p.double_param();
        break;
      case InferParameter::kStringParam:
        (*out)[key] = p.string_param();
        break;
      case InferParameter::kUint64Param:
        if (p.uint64_param() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          return Status::InvalidArgument(where + " parameter '" + key + "' is out of range");
        (*out)[key] = static_cast<int64_t>(p.uint64_param());
        break;
      case InferParameter::PARAMETER_CHOICE_NOT_SET:
        return Status::InvalidArgument(where + " parameter '" + key + "' has no value");
    }
  }
  return Status::OK();
}

// Shared memory is a Triton extension inferd does not offer: refuse it
// rather than ignore it (ignoring would read the wrong data).
Status CheckUnsupported(const Map<std::string, InferParameter>& params, const std::string& what) {
  if (params.count("shared_memory_region"))
    return Status::Unimplemented(what + ": shared memory is not supported; send the data in the request");
  return Status::OK();
}

// An output's "classification" parameter (tritonclient's class_count): a
// positive int64 (or uint64).
Result<uint32_t> ClassificationOf(const Map<std::string, InferParameter>& params, const std::string& what) {
  auto it = params.find("classification");
  if (it == params.end()) return 0u;
  int64_t k = 0;
  if (it->second.parameter_choice_case() == InferParameter::kInt64Param) {
    k = it->second.int64_param();
  } else if (it->second.parameter_choice_case() == InferParameter::kUint64Param &&
             it->second.uint64_param() <= UINT32_MAX) {
    k = static_cast<int64_t>(it->second.uint64_param());
  } else {
    return Status::InvalidArgument(what + ": 'classification' must be an integer");
  }
  if (k < 1 || k > UINT32_MAX) return Status::InvalidArgument(what + ": 'classification' must be >= 1");
  return static_cast<uint32_t>(k);
}

Result<Shape> DecodeShape(const RepeatedField<int64_t>& dims, const std::string& name) {
  if (static_cast<size_t>(dims.size()) > kMaxDims)
    return Status::InvalidArgument("input '" + name + "': too many dimensions");
  Shape s(dims.begin(), dims.end());
  for (int64_t d : s)
    if (d < 0) return Status::InvalidArgument("input '" + name + "': 'shape' must contain non-negative integers");
  if (ElementCount(s) < 0) return Status::InvalidArgument("input '" + name + "': shape is too large");
  return s;
}

// The contents field a datatype's elements travel in.
int ContentsFieldOf(DataType dt) {
  switch (dt) {
    case DataType::kBool:
      return InferTensorContents::kBoolContentsFieldNumber;
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
      return InferTensorContents::kIntContentsFieldNumber;
    case DataType::kInt64:
      return InferTensorContents::kInt64ContentsFieldNumber;
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
      return InferTensorContents::kUintContentsFieldNumber;
    case DataType::kUint64:
      return InferTensorContents::kUint64ContentsFieldNumber;
    case DataType::kFp16:
    case DataType::kBf16:
    case DataType::kFp32:
      return InferTensorContents::kFp32ContentsFieldNumber;
    case DataType::kFp64:
      return InferTensorContents::kFp64ContentsFieldNumber;
    case DataType::kBytes:
      return InferTensorContents::kBytesContentsFieldNumber;
    case DataType::kInvalid:
      break;
  }
  return 0;
}

const char* ContentsFieldName(int field) {
  switch (field) {
    case InferTensorContents::kBoolContentsFieldNumber:
      return "bool_contents";
    case InferTensorContents::kIntContentsFieldNumber:
      return "int_contents";
    case InferTensorContents::kInt64ContentsFieldNumber:
      return "int64_contents";
    case InferTensorContents::kUintContentsFieldNumber:
      return "uint_contents";
    case InferTensorContents::kUint64ContentsFieldNumber:
      return "uint64_contents";
    case InferTensorContents::kFp32ContentsFieldNumber:
      return "fp32_contents";
    case InferTensorContents::kFp64ContentsFieldNumber:
      return "fp64_contents";
    case InferTensorContents::kBytesContentsFieldNumber:
      return "bytes_contents";
  }
  return "?";
}

int ContentsCount(const InferTensorContents& c, int field) {
  switch (field) {
    case InferTensorContents::kBoolContentsFieldNumber:
      return c.bool_contents_size();
    case InferTensorContents::kIntContentsFieldNumber:
      return c.int_contents_size();
    case InferTensorContents::kInt64ContentsFieldNumber:
      return c.int64_contents_size();
    case InferTensorContents::kUintContentsFieldNumber:
      return c.uint_contents_size();
    case InferTensorContents::kUint64ContentsFieldNumber:
      return c.uint64_contents_size();
    case InferTensorContents::kFp32ContentsFieldNumber:
      return c.fp32_contents_size();
    case InferTensorContents::kFp64ContentsFieldNumber:
      return c.fp64_contents_size();
    case InferTensorContents::kBytesContentsFieldNumber:
      return c.bytes_contents_size();
  }
  return 0;
}

// Appends `src` converted element by element to T, failing on values T
// cannot hold.
template <typename T, typename S>
Status AppendNarrowed(const RepeatedField<S>& src, std::string* out, const std::string& name, DataType dt) {
  const size_t base = out->size();
  out->resize(base + src.size() * sizeof(T));
  char* dst = out->data() + base;
  for (int i = 0; i < src.size(); ++i) {
    const S v = src.Get(i);
    if (v < static_cast<S>(std::numeric_limits<T>::min()) || v > static_cast<S>(std::numeric_limits<T>::max())) {
      return Status::InvalidArgument("input '" + name + "' element " + std::to_string(i) + " (" + std::to_string(v) +
                                     ") is out of range for " + std::string(DataTypeToWire(dt)));
    }
    const T t = static_cast<T>(v);
    std::memcpy(dst + i * sizeof(T), &t, sizeof(T));
  }
  return Status::OK();
}

template <typename S>
void AppendRaw(const RepeatedField<S>& src, std::string* out) {
  out->append(reinterpret_cast<const char*>(src.data()), src.size() * sizeof(S));
}

template <typename T>
T Load(const std::byte* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

// Adds the tensor's elements to `dst` converted to D (the contents field type).
template <typename T, typename D>
void AddConverted(const Tensor& t, RepeatedField<D>* dst) {
  const int64_t n = static_cast<int64_t>(t.byte_size / sizeof(T));
  dst->Reserve(static_cast<int>(n));
  for (int64_t i = 0; i < n; ++i) dst->AddAlreadyReserved(static_cast<D>(Load<T>(t.data, i)));
}

template <typename T>
void AddSame(const Tensor& t, RepeatedField<T>* dst) {
  const int n = static_cast<int>(t.byte_size / sizeof(T));
  dst->Resize(n, T());
  if (n > 0) std::memcpy(dst->mutable_data(), t.data, static_cast<size_t>(n) * sizeof(T));
}

void EncodeContents(const Tensor& t, InferTensorContents* c) {
  switch (t.dtype) {
    case DataType::kBool:
      AddConverted<uint8_t>(t, c->mutable_bool_contents());
      break;
    case DataType::kInt8:
      AddConverted<int8_t>(t, c->mutable_int_contents());
      break;
    case DataType::kInt16:
      AddConverted<int16_t>(t, c->mutable_int_contents());
      break;
    case DataType::kInt32:
      AddSame(t, c->mutable_int_contents());
      break;
    case DataType::kInt64:
      AddSame(t, c->mutable_int64_contents());
      break;
    case DataType::kUint8:
      AddConverted<uint8_t>(t, c->mutable_uint_contents());
      break;
    case DataType::kUint16:
      AddConverted<uint16_t>(t, c->mutable_uint_contents());
      break;
    case DataType::kUint32:
      AddSame(t, c->mutable_uint_contents());
      break;
    case DataType::kUint64:
      AddSame(t, c->mutable_uint64_contents());
      break;
    case DataType::kFp16: {
      const int64_t n = static_cast<int64_t>(t.byte_size / 2);
      for (int64_t i = 0; i < n; ++i) c->add_fp32_contents(HalfToFloat(Load<uint16_t>(t.data, i)));
      break;
    }
    case DataType::kBf16: {
      const int64_t n = static_cast<int64_t>(t.byte_size / 2);
      for (int64_t i = 0; i < n; ++i) c->add_fp32_contents(Bf16ToFloat(Load<uint16_t>(t.data, i)));
      break;
    }
    case DataType::kFp32:
      AddSame(t, c->mutable_fp32_contents());
      break;
    case DataType::kFp64:
      AddSame(t, c->mutable_fp64_contents());
      break;
    case DataType::kBytes: {
      auto elems = SplitBytesElements(t.bytes());
      if (elems.ok())
        for (std::string_view e : *elems) c->add_bytes_contents(e.data(), e.size());
      break;
    }
    case DataType::kInvalid:
      break;
  }
}

}  // namespace

Result<Tensor> DecodeContents(const InferTensorContents& c, DataType dt, Shape shape, std::string name) {
  const int field = ContentsFieldOf(dt);
  if (field == 0) return Status::InvalidArgument("input '" + name + "' has an invalid datatype");
  for (int f = InferTensorContents::kBoolContentsFieldNumber; f <= InferTensorContents::kBytesContentsFieldNumber;
       ++f) {
    if (f != field && ContentsCount(c, f) > 0) {
      return Status::InvalidArgument("input '" + name + "' is " + std::string(DataTypeToWire(dt)) + " but carries " +
                                     ContentsFieldName(f) + "; its elements go in " + ContentsFieldName(field));
    }
  }
  const int64_t want = ElementCount(shape);
  const int have = ContentsCount(c, field);
  if (want != have) {
    return Status::InvalidArgument("unexpected number of elements for input '" + name + "': shape " +
                                   ShapeToString(shape) + " needs " + std::to_string(want) + ", " +
                                   ContentsFieldName(field) + " has " + std::to_string(have));
  }
  auto buf = std::make_shared<std::string>();
  Status st;
  switch (dt) {
    case DataType::kBool:
      buf->reserve(static_cast<size_t>(have));
      for (bool b : c.bool_contents()) buf->push_back(b ? 1 : 0);
      break;
    case DataType::kInt8:
      st = AppendNarrowed<int8_t>(c.int_contents(), buf.get(), name, dt);
      break;
    case DataType::kInt16:
      st = AppendNarrowed<int16_t>(c.int_contents(), buf.get(), name, dt);
      break;
    case DataType::kInt32:
      AppendRaw(c.int_contents(), buf.get());
      break;
    case DataType::kInt64:
      AppendRaw(c.int64_contents(), buf.get());
      break;
    case DataType::kUint8:
      st = AppendNarrowed<uint8_t>(c.uint_contents(), buf.get(), name, dt);
      break;
    case DataType::kUint16:
      st = AppendNarrowed<uint16_t>(c.uint_contents(), buf.get(), name, dt);
      break;
    case DataType::kUint32:
      AppendRaw(c.uint_contents(), buf.get());
      break;
    case DataType::kUint64:
      AppendRaw(c.uint64_contents(), buf.get());
      break;
    case DataType::kFp16:
    case DataType::kBf16:
      buf->resize(static_cast<size_t>(have) * 2);
      for (int i = 0; i < have; ++i) {
        const float f = c.fp32_contents(i);
        const uint16_t h = dt == DataType::kFp16 ? FloatToHalf(f) : FloatToBf16(f);
        std::memcpy(buf->data() + 2 * i, &h, 2);
      }
      break;
    case DataType::kFp32:
      AppendRaw(c.fp32_contents(), buf.get());
      break;
    case DataType::kFp64:
      AppendRaw(c.fp64_contents(), buf.get());
      break;
    case DataType::kBytes:
      for (const std::string& e : c.bytes_contents()) {
        if (e.size() > std::numeric_limits<uint32_t>::max())
          return Status::InvalidArgument("input '" + name + "': a BYTES element is larger than 4 GiB");
        AppendBytesElement(buf.get(), std::string_view(e));
      }
      break;
    case DataType::kInvalid:
      break;
  }
  INFERD_RETURN_IF_ERROR(st);
  return Tensor::Own(std::move(name), dt, std::move(shape), std::move(buf));
}

Result<std::unique_ptr<InferRequest>> DecodeInferRequest(inference::ModelInferRequest* msg) {
  auto req = std::make_unique<InferRequest>();
  req->model_name = msg->model_name();
  req->model_version = msg->model_version();
  req->id = msg->id();
  INFERD_RETURN_IF_ERROR(DecodeParameters(msg->parameters(), &req->parameters, "request"));

  const int n_raw = msg->raw_input_contents_size();
  if (n_raw > 0 && n_raw != msg->inputs_size()) {
    return Status::InvalidArgument("the request has " + std::to_string(n_raw) + " raw_input_contents for " +
                                   std::to_string(msg->inputs_size()) +
                                   " inputs: when raw_input_contents is used it holds one entry per input");
  }
  req->inputs.reserve(static_cast<size_t>(msg->inputs_size()));
  for (int i = 0; i < msg->inputs_size(); ++i) {
    const auto& in = msg->inputs(i);
    if (in.name().empty()) return Status::InvalidArgument("input " + std::to_string(i) + " has no name");
    const std::string& name = in.name();
    auto dtype = DataTypeFromWire(in.datatype());
    if (!dtype) return Status::InvalidArgument("input '" + name + "' has unknown datatype '" + in.datatype() + "'");
    INFERD_RETURN_IF_ERROR(CheckUnsupported(in.parameters(), "input '" + name + "'"));
    INFERD_ASSIGN_OR_RETURN(Shape shape, DecodeShape(in.shape(), name));
    if (n_raw > 0) {
      if (in.has_contents()) {
        return Status::InvalidArgument("input '" + name +
                                       "' has contents although the request uses raw_input_contents");
      }
      Tensor t = Tensor::Own(name, *dtype, std::move(shape),
                             std::make_shared<const std::string>(std::move(*msg->mutable_raw_input_contents(i))));
      INFERD_RETURN_IF_ERROR(t.Validate());
      req->inputs.push_back(std::move(t));
    } else {
      if (!in.has_contents()) {
        return Status::InvalidArgument("input '" + name +
                                       "' has no contents and the request has no raw_input_contents");
      }
      INFERD_ASSIGN_OR_RETURN(Tensor t, DecodeContents(in.contents(), *dtype, std::move(shape), name));
      req->inputs.push_back(std::move(t));
    }
  }
  for (const auto& o : msg->outputs()) {
    if (o.name().empty()) return Status::InvalidArgument("each requested output needs a name");
    INFERD_RETURN_IF_ERROR(CheckUnsupported(o.parameters(), "output '" + o.name() + "'"));
    for (const auto& prev : req->outputs)
      if (prev.name == o.name()) return Status::InvalidArgument("output '" + o.name() + "' is requested twice");
    RequestedOutput ro;
    ro.name = o.name();
    INFERD_ASSIGN_OR_RETURN(ro.classification, ClassificationOf(o.parameters(), "output '" + o.name() + "'"));
    req->outputs.push_back(std::move(ro));
  }
  return req;
}

void EncodeInferResponse(const InferResponse& r, bool raw, inference::ModelInferResponse* out) {
  out->set_model_name(r.model_name);
  out->set_model_version(r.model_version);
  out->set_id(r.id);
  for (const auto& [key, value] : r.parameters) {
    InferParameter& p = (*out->mutable_parameters())[key];
    std::visit(
        [&p](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, bool>)
            p.set_bool_param(v);
          else if constexpr (std::is_same_v<T, int64_t>)
            p.set_int64_param(v);
          else if constexpr (std::is_same_v<T, double>)
            p.set_double_param(v);
          else
            p.set_string_param(v);
        },
        value);
  }
  for (const Tensor& t : r.outputs) {
    auto* o = out->add_outputs();
    o->set_name(t.name);
    o->set_datatype(std::string(DataTypeToWire(t.dtype)));
    o->mutable_shape()->Add(t.shape.begin(), t.shape.end());
    if (raw)
      out->add_raw_output_contents()->assign(reinterpret_cast<const char*>(t.data), t.byte_size);
    else
      EncodeContents(t, o->mutable_contents());
  }
}

}  // namespace inferd::grpcfe
