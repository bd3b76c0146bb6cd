#include "backends/xgboost/format_check.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace inferd::xgboost {
namespace {

Status Bad(std::string_view format, size_t offset, const std::string& what) {
  return Status::InvalidArgument("malformed XGBoost " + std::string(format) + " model at byte " +
                                 std::to_string(offset) + ": " + what);
}

// ---- UBJSON (draft 12, big-endian), as XGBoost writes and reads it. ----
// Walks a document with bounds and writes it as JSON text (for the
// semantic check, model_check.h).
class UbjWalker {
 public:
  UbjWalker(std::string_view b, std::string* json) : b_(b), json_(json) {}

  Status Document() {
    INFERD_RETURN_IF_ERROR(Value(Next(), 0));
    return Status::OK();
  }

 private:
  static constexpr int kMaxDepth = 64;

  Status Fail(const std::string& what) const { return Bad("UBJSON", pos_, what); }
  size_t Left() const { return b_.size() - pos_; }
  char Next() { return pos_ < b_.size() ? b_[pos_++] : '\0'; }

  Status Skip(size_t n) {
    if (n > Left()) return Fail("needs " + std::to_string(n) + " bytes, " + std::to_string(Left()) + " left");
    pos_ += n;
    return Status::OK();
  }

  static int FixedSize(char marker) {
    switch (marker) {
      case 'i':
      case 'U':
      case 'C':
        return 1;
      case 'I':
        return 2;
      case 'l':
      case 'd':
        return 4;
      case 'L':
      case 'D':
        return 8;
      case 'Z':
      case 'T':
      case 'F':
      case 'N':
        return 0;
      default:
        return -1;
    }
  }

  // An integer of the given marker; lengths and counts must be >= 0.
  Status Int(char marker, int64_t* out) {
    const int n = FixedSize(marker);
    if (marker != 'i' && marker != 'U' && marker != 'I' && marker != 'l' && marker != 'L') {
      return Fail(std::string("expected an integer marker, found '") + marker + "'");
    }
    if (static_cast<size_t>(n) > Left()) return Fail("truncated integer");
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(b_[pos_ + i]);
    pos_ += n;
    int64_t s;
    switch (marker) {
      case 'i':
        s = static_cast<int8_t>(v);
        break;
      case 'U':
        s = static_cast<uint8_t>(v);
        break;
      case 'I':
        s = static_cast<int16_t>(v);
        break;
      case 'l':
        s = static_cast<int32_t>(v);
        break;
      default:
        s = static_cast<int64_t>(v);
        break;
    }
    *out = s;
    return Status::OK();
  }

  Status Length(int64_t* n) {
    INFERD_RETURN_IF_ERROR(Int(Next(), n));
    if (*n < 0) return Fail("negative length");
    if (static_cast<uint64_t>(*n) > Left()) return Fail("length " + std::to_string(*n) + " exceeds the file");
    return Status::OK();
  }

  Status String() {
    int64_t n = 0;
    INFERD_RETURN_IF_ERROR(Length(&n));
    json_->push_back('"');
    for (char c : b_.substr(pos_, static_cast<size_t>(n))) {
      if (c == '"' || c == '\\') {
        json_->push_back('\\');
        json_->push_back(c);
      } else if (static_cast<unsigned char>(c) < 0x20) {
        json_->push_back('?');
      } else {
        json_->push_back(c);
      }
    }
    json_->push_back('"');
    return Skip(static_cast<size_t>(n));
  }

  uint64_t BigEndian(int n) const {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<uint8_t>(b_[pos_ + i]);
    return v;
  }

  Status Scalar(char marker) {
    char buf[40];
    switch (marker) {
      case 'Z':
        json_->append("null");
        return Status::OK();
      case 'T':
        json_->append("true");
        return Status::OK();
      case 'F':
        json_->append("false");
        return Status::OK();
      case 'N':
        json_->append("null");
        return Status::OK();
      case 'C':
        INFERD_RETURN_IF_ERROR(Skip(1));
        json_->append(std::to_string(static_cast<uint8_t>(b_[pos_ - 1])));
        return Status::OK();
      case 'd':
      case 'D': {
        const int n = marker == 'd' ? 4 : 8;
        if (static_cast<size_t>(n) > Left()) return Fail("truncated number");
        const uint64_t bits = BigEndian(n);
        pos_ += n;
        double v;
        if (n == 4) {
          float f;
          const uint32_t b32 = static_cast<uint32_t>(bits);
          std::memcpy(&f, &b32, 4);
          v = f;
        } else {
          std::memcpy(&v, &bits, 8);
        }
        if (v != v) {
          json_->append("NaN");
        } else if (v > 1.7e308 || v < -1.7e308) {
          json_->append(v > 0 ? "Infinity" : "-Infinity");
        } else {
          std::snprintf(buf, sizeof buf, "%.9g", v);
          json_->append(buf);
        }
        return Status::OK();
      }
      default: {
        int64_t v = 0;
        INFERD_RETURN_IF_ERROR(Int(marker, &v));
        json_->append(std::to_string(v));
        return Status::OK();
      }
    }
  }

  Status Value(char marker, int depth) {
    if (depth > kMaxDepth) return Fail("nested deeper than " + std::to_string(kMaxDepth));
    switch (marker) {
      case 'S':
      case 'H':
        return String();
      case '[':
        return Container(false, depth);
      case '{':
        return Container(true, depth);
      default:
        if (FixedSize(marker) < 0) return Fail(std::string("unknown marker '") + marker + "'");
        return Scalar(marker);
    }
  }

  // [ ... ] or { key value ... }, optionally typed ($ marker) and counted (#).
  Status Container(bool object, int depth) {
    char type = 0;
    int64_t count = -1;
    if (pos_ < b_.size() && b_[pos_] == '$') {
      ++pos_;
      type = Next();
      if (type == '[' || type == '{' || (FixedSize(type) < 0 && type != 'S' && type != 'H')) {
        return Fail(std::string("unsupported container element type '") + type + "'");
      }
      if (pos_ >= b_.size() || b_[pos_] != '#') return Fail("a typed container needs a count");
    }
    if (pos_ < b_.size() && b_[pos_] == '#') {
      ++pos_;
      INFERD_RETURN_IF_ERROR(Int(Next(), &count));
      if (count < 0) return Fail("negative count");
    }
    json_->push_back(object ? '{' : '[');
    if (count >= 0) {
      // Each element takes at least one byte, or its fixed size when typed
      // (zero-size types, e.g. typed nulls, are refused: they could repeat
      // without consuming input).
      const int fixed = type ? FixedSize(type) : -1;
      if (type && fixed == 0) return Fail("container of zero-size elements");
      const uint64_t min_bytes = fixed > 0 && !object ? static_cast<uint64_t>(fixed) : 1;
      if (static_cast<uint64_t>(count) > Left() / min_bytes) {
        return Fail("count " + std::to_string(count) + " exceeds the file");
      }
      for (int64_t i = 0; i < count; ++i) {
        if (i > 0) json_->push_back(',');
        INFERD_RETURN_IF_ERROR(Element(object, type, depth));
      }
      json_->push_back(object ? '}' : ']');
      return Status::OK();
    }
    for (bool first = true;; first = false) {
      if (pos_ >= b_.size()) return Fail("unterminated container");
      const char c = b_[pos_];
      if (c == (object ? '}' : ']')) {
        ++pos_;
        json_->push_back(c);
        return Status::OK();
      }
      if (!first) json_->push_back(',');
      INFERD_RETURN_IF_ERROR(Element(object, 0, depth));
    }
  }

  Status Element(bool object, char type, int depth) {
    if (object) {
      INFERD_RETURN_IF_ERROR(String());  // key: length + bytes, no 'S'
      json_->push_back(':');
    }
    return Value(type ? type : Next(), depth + 1);
  }

  std::string_view b_;
  std::string* json_;
  size_t pos_ = 0;
};

// ---- The legacy binary format (little-endian structs and dmlc vectors). ----
class LegacyWalker {
 public:
  explicit LegacyWalker(std::string_view b) : b_(b) {}

  Status Model() {
    if (b_.substr(0, 4) == "bs64") return Fail("base64 models are not supported");
    if (b_.substr(0, 4) == "binf") pos_ = 4;
    // LearnerModelParamLegacy: 136 bytes; contain_extra_attrs at 12,
    // contain_eval_metrics at 16.
    const size_t param = pos_;
    INFERD_RETURN_IF_ERROR(Skip(136));
    const int32_t extra_attrs = I32(param + 12), eval_metrics = I32(param + 16);
    std::string objective, booster;
    INFERD_RETURN_IF_ERROR(String(&objective, 256));
    INFERD_RETURN_IF_ERROR(String(&booster, 256));
    if (booster == "gbtree" || booster == "dart") {
      INFERD_RETURN_IF_ERROR(Trees(booster == "dart"));
    } else if (booster == "gblinear") {
      INFERD_RETURN_IF_ERROR(Skip(136));  // GBLinearModelParam
      INFERD_RETURN_IF_ERROR(Vector(4));  // weights
    } else {
      return Fail("unknown gradient booster '" + booster.substr(0, 32) + "'");
    }
    if (extra_attrs != 0) {
      uint64_t n = 0;
      INFERD_RETURN_IF_ERROR(Count(&n, 16));
      std::string ignored;
      for (uint64_t i = 0; i < 2 * n; ++i) INFERD_RETURN_IF_ERROR(String(&ignored, Left()));
    }
    if (eval_metrics != 0) {
      uint64_t n = 0;
      INFERD_RETURN_IF_ERROR(Count(&n, 8));
      std::string ignored;
      for (uint64_t i = 0; i < n; ++i) INFERD_RETURN_IF_ERROR(String(&ignored, Left()));
    }
    if (Left() != 0) return Fail(std::to_string(Left()) + " unexpected bytes after the model");
    return Status::OK();
  }

 private:
  Status Fail(const std::string& what) const { return Bad("binary", pos_, what); }
  size_t Left() const { return b_.size() - pos_; }
  int32_t I32(size_t at) const {
    int32_t v;
    std::memcpy(&v, b_.data() + at, 4);
    return v;
  }
  Status Skip(size_t n) {
    if (n > Left()) return Fail("needs " + std::to_string(n) + " bytes, " + std::to_string(Left()) + " left");
    pos_ += n;
    return Status::OK();
  }
  // A dmlc element count (uint64) whose elements, `min_bytes` each, fit.
  Status Count(uint64_t* n, size_t min_bytes) {
    if (Left() < 8) return Fail("truncated count");
    std::memcpy(n, b_.data() + pos_, 8);
    pos_ += 8;
    if (*n > Left() / min_bytes) return Fail("count " + std::to_string(*n) + " exceeds the file");
    return Status::OK();
  }
  Status String(std::string* s, size_t max) {
    uint64_t n = 0;
    INFERD_RETURN_IF_ERROR(Count(&n, 1));
    if (n > max) return Fail("string of " + std::to_string(n) + " bytes");
    s->assign(b_.data() + pos_, n);
    pos_ += n;
    return Status::OK();
  }
  Status Vector(size_t element_bytes) {
    uint64_t n = 0;
    INFERD_RETURN_IF_ERROR(Count(&n, element_bytes));
    return Skip(n * element_bytes);
  }

  // GBTreeModelParam (160 bytes; num_trees first), the trees, tree_info;
  // dart adds a weight per tree.
  Status Trees(bool dart) {
    const size_t param = pos_;
    INFERD_RETURN_IF_ERROR(Skip(160));
    const int32_t num_trees = I32(param);
    // A tree takes at least 148 + 36 bytes.
    if (num_trees < 0 || static_cast<uint64_t>(num_trees) > Left() / 184) {
      return Fail(std::to_string(num_trees) + " trees do not fit in the file");
    }
    for (int32_t t = 0; t < num_trees; ++t) {
      // TreeParam: 148 bytes; num_nodes at 4, size_leaf_vector at 20.
      const size_t tp = pos_;
      INFERD_RETURN_IF_ERROR(Skip(148));
      const int32_t nodes = I32(tp + 4);
      if (I32(tp + 20) != 0) return Fail("tree " + std::to_string(t) + " has vector leaves (not supported)");
      if (nodes < 1 || static_cast<uint64_t>(nodes) > Left() / 36) {
        return Fail("tree " + std::to_string(t) + ": " + std::to_string(nodes) + " nodes do not fit in the file");
      }
      INFERD_RETURN_IF_ERROR(Skip(static_cast<size_t>(nodes) * 36));  // nodes (20 bytes) + stats (16)
    }
    INFERD_RETURN_IF_ERROR(Skip(static_cast<size_t>(num_trees) * 4));  // tree_info
    if (dart && num_trees != 0) {
      const size_t at = pos_;
      uint64_t n = 0;
      INFERD_RETURN_IF_ERROR(Count(&n, 4));
      if (n != static_cast<uint64_t>(num_trees)) {
        pos_ = at;
        return Fail("dart has " + std::to_string(n) + " tree weights for " + std::to_string(num_trees) + " trees");
      }
      INFERD_RETURN_IF_ERROR(Skip(n * 4));
    }
    return Status::OK();
  }

  std::string_view b_;
  size_t pos_ = 0;
};

}  // namespace

ModelFormat DetectFormat(std::string_view bytes) {
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || bytes[first] != '{') return ModelFormat::kLegacyBinary;
  const size_t second = bytes.find_first_not_of(" \t\r\n", first + 1);
  if (second != std::string_view::npos && (bytes[second] == '"' || bytes[second] == '}') &&
      (first > 0 || second > first + 1 || bytes[second] == '"')) {
    return ModelFormat::kJson;
  }
  return ModelFormat::kUbjson;
}

Status CheckJsonText(std::string_view bytes) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseNanAndInfFlag | rapidjson::kParseStopWhenDoneFlag | rapidjson::kParseIterativeFlag>(
      bytes.data(), bytes.size());
  if (doc.HasParseError()) {
    return Bad("JSON", doc.GetErrorOffset(), rapidjson::GetParseError_En(doc.GetParseError()));
  }
  if (!doc.IsObject()) return Bad("JSON", 0, "not an object");
  return Status::OK();
}

Result<std::string> UbjsonToJson(std::string_view bytes) {
  std::string json;
  INFERD_RETURN_IF_ERROR(UbjWalker(bytes, &json).Document());
  return json;
}

Status CheckLegacyBinary(std::string_view bytes) { return LegacyWalker(bytes).Model(); }

}  // namespace inferd::xgboost
