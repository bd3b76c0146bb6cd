// ONNX conformance: runs the backend test data Debian ships in
// libonnx-testdata (node, pytorch-converted, pytorch-operator, simple)
// through the executor, writes a pass table per op, and fails when a case
// listed in the expected-pass file fails (a regression).
//
//   onnx_conformance --data /usr/share/libonnx-testdata/data --expected FILE
//                    [--report OUT.md] [--update]
//
// Each case: <category>/<test>/model.onnx and test_data_set_<k>/input_<i>.pb,
// output_<j>.pb (TensorProto, SequenceProto or OptionalProto, as the graph's
// input and output types say). Outputs compare as ONNX's own runner does:
// |got - want| <= 1e-7 + 1e-3 * |want|, NaN equal to NaN, same element type;
// strings exactly.
#include <ATen/Parallel.h>
#include <onnx/onnx-data_pb.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "backends/onnx/model_loader.h"
#include "backends/onnx/tensor_proto.h"

namespace fs = std::filesystem;
using namespace inferd;
using namespace inferd::onnxexec;

namespace {

const char* kCategories[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
const std::set<std::string> kTrainingOps = {"Adagrad", "Adam", "Momentum", "Gradient"};

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<Value> ReadValue(const fs::path& p, const onnx::TypeProto& type) {
  const std::string bytes = ReadFile(p);
  if (type.has_sequence_type()) {
    onnx::SequenceProto s;
    if (!s.ParseFromString(bytes)) return Status::InvalidArgument("bad SequenceProto " + p.string());
    return FromSequenceProto(s);
  }
  if (type.has_optional_type()) {
    onnx::OptionalProto o;
    if (!o.ParseFromString(bytes)) return Status::InvalidArgument("bad OptionalProto " + p.string());
    return FromOptionalProto(o);
  }
  onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) return Status::InvalidArgument("bad TensorProto " + p.string());
  return FromTensorProto(t);
}

std::string Compare(const Value& got, const Value& want, const std::string& what) {
  if (want.kind() == Value::Kind::kNoneOptional || got.kind() == Value::Kind::kNoneOptional) {
    return got.kind() == want.kind() ? "" : what + ": optional presence differs";
  }
  if (want.is_sequence()) {
    if (!got.is_sequence()) return what + ": expected a sequence";
    if (got.sequence().size() != want.sequence().size()) {
      return what + ": sequence of " + std::to_string(got.sequence().size()) + ", expected " +
             std::to_string(want.sequence().size());
    }
    for (size_t i = 0; i < want.sequence().size(); ++i) {
      auto e = Compare(got.sequence()[i], want.sequence()[i], what + "[" + std::to_string(i) + "]");
      if (!e.empty()) return e;
    }
    return "";
  }
  if (want.is_strings()) {
    if (!got.is_strings()) return what + ": expected strings";
    if (got.strings().shape != want.strings().shape) return what + ": string shape differs";
    return got.strings().data == want.strings().data ? "" : what + ": strings differ";
  }
  if (!got.is_tensor()) return what + ": expected a tensor";
  const at::Tensor& g = got.tensor();
  const at::Tensor& w = want.tensor();
  if (g.scalar_type() != w.scalar_type()) {
    return what + ": element type " + OnnxTypeName(OnnxTypeOf(g.scalar_type())) + ", expected " +
           OnnxTypeName(OnnxTypeOf(w.scalar_type()));
  }
  if (g.sizes() != w.sizes()) {
    std::ostringstream ss;
    ss << what << ": shape " << g.sizes() << ", expected " << w.sizes();
    return ss.str();
  }
  if (w.numel() == 0) return "";
  if (at::isFloatingType(w.scalar_type())) {
    at::Tensor gd = g.to(at::kDouble), wd = w.to(at::kDouble);
    at::Tensor both_nan = at::isnan(gd) & at::isnan(wd);
    at::Tensor same_inf = at::isinf(wd) & (gd == wd);
    at::Tensor ok = (at::abs(gd - wd) <= 1e-7 + 1e-3 * at::abs(wd)) | both_nan | same_inf;
    if (!ok.all().item<bool>()) {
      const int64_t bad = (~ok).sum().item<int64_t>();
      return what + ": " + std::to_string(bad) + " of " + std::to_string(w.numel()) + " values differ";
    }
    return "";
  }
  return at::equal(g, w) ? "" : what + ": values differ";
}

struct Outcome {
  std::string category, name, op;
  bool training = false;
  bool passed = false;
  std::string why;
};

Outcome RunCase(const OpRegistry& ops, const std::string& category, const fs::path& dir) {
  Outcome o;
  o.category = category;
  o.name = dir.filename().string();
  onnx::ModelProto proto;
  if (!proto.ParseFromString(ReadFile(dir / "model.onnx"))) {
    o.why = "model does not parse";
    return o;
  }
  for (const auto& n : proto.graph().node()) {
    if (kTrainingOps.count(n.op_type())) o.training = true;
    if (n.op_type() != "Constant" || o.op.empty()) o.op = n.op_type();
  }
  auto model = LoadOnnxModelFile((dir / "model.onnx").string(), ops);
  if (!model.ok()) {
    o.why = "load: " + model.status().message();
    return o;
  }
  std::map<std::string, const onnx::TypeProto*> in_types, out_types;
  for (const auto& v : proto.graph().input()) in_types[v.name()] = &v.type();
  std::vector<const onnx::TypeProto*> outs;
  for (const auto& v : proto.graph().output()) outs.push_back(&v.type());
  int sets = 0;
  for (int k = 0;; ++k) {
    const fs::path set = dir / ("test_data_set_" + std::to_string(k));
    if (!fs::is_directory(set)) break;
    ++sets;
    std::vector<Value> inputs;
    const auto& names = model->plan->input_names();
    for (size_t i = 0; i < names.size(); ++i) {
      const fs::path p = set / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) {
        inputs.emplace_back();  // omitted optional input
        continue;
      }
      auto v = ReadValue(p, *in_types.at(names[i]));
      if (!v.ok()) {
        o.why = "input: " + v.status().message();
        return o;
      }
      inputs.push_back(std::move(*v));
    }
    std::vector<Value> got;
    Status st;
    try {
      st = model->plan->Run(std::move(inputs), &got);
    } catch (const std::exception& e) {
      st = Status::Internal(e.what());
    }
    if (!st.ok()) {
      o.why = "run: " + st.message();
      return o;
    }
    for (size_t j = 0; j < outs.size(); ++j) {
      auto want = ReadValue(set / ("output_" + std::to_string(j) + ".pb"), *outs[j]);
      if (!want.ok()) {
        o.why = "output: " + want.status().message();
        return o;
      }
      const std::string diff = Compare(got[j], *want, "output " + std::to_string(j));
      if (!diff.empty()) {
        o.why = diff;
        return o;
      }
    }
  }
  o.passed = sets > 0;
  if (!sets) o.why = "no test data";
  return o;
}

std::string OneLine(std::string s) {
  for (auto& c : s)
    if (c == '\n' || c == '|') c = ' ';
  if (s.size() > 160) s = s.substr(0, 160) + "...";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = "/usr/share/libonnx-testdata/data", expected_file, report_file;
  bool update = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--data" && i + 1 < argc)
      data = argv[++i];
    else if (a == "--expected" && i + 1 < argc)
      expected_file = argv[++i];
    else if (a == "--report" && i + 1 < argc)
      report_file = argv[++i];
    else if (a == "--update")
      update = true;
    else {
      std::cerr << "usage: onnx_conformance [--data DIR] [--expected FILE] [--report OUT.md] [--update]\n";
      return 2;
    }
  }
  c10::InferenceMode guard;
  at::set_num_threads(1);
  auto ops = MakeOpRegistry();
  std::vector<Outcome> all;
  for (const char* category : kCategories) {
    std::vector<fs::path> cases;
    for (const auto& e : fs::directory_iterator(fs::path(data) / category))
      if (e.is_directory()) cases.push_back(e.path());
    std::sort(cases.begin(), cases.end());
    for (const auto& c : cases) all.push_back(RunCase(*ops, category, c));
  }
  std::set<std::string> expected;
  if (!expected_file.empty()) {
    std::ifstream in(expected_file);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && line[0] != '#') expected.insert(line);
  }
  // Summary per category; per op for node cases.
  std::map<std::string, std::pair<int, int>> per_category;
  std::map<std::string, std::pair<int, int>> per_op;
  int node_total = 0, node_pass = 0;
  std::vector<std::string> regressions, new_passes;
  for (const auto& o : all) {
    const std::string key = o.category + "/" + o.name;
    auto& c = per_category[o.category];
    ++c.second;
    c.first += o.passed;
    if (o.category == "node" && !o.training) {
      ++node_total;
      node_pass += o.passed;
      auto& p = per_op[o.op];
      ++p.second;
      p.first += o.passed;
    }
    if (expected.count(key) && !o.passed) regressions.push_back(key + ": " + OneLine(o.why));
    if (!expected.count(key) && o.passed) new_passes.push_back(key);
  }
  std::ostringstream md;
  md << "# ONNX conformance (libonnx-testdata " << data << ")\n\n| suite | passed | cases |\n|---|---|---|\n";
  for (const auto& [cat, c] : per_category) md << "| " << cat << " | " << c.first << " | " << c.second << " |\n";
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f%%", node_total ? 100.0 * node_pass / node_total : 0.0);
  md << "\nnode cases without training ops: " << node_pass << " of " << node_total << " pass (" << pct << ")\n\n";
  md << "| op (node cases) | passed | cases |\n|---|---|---|\n";
  for (const auto& [op, p] : per_op) md << "| " << op << " | " << p.first << " | " << p.second << " |\n";
  md << "\n## Failing cases\n\n| case | why |\n|---|---|\n";
  for (const auto& o : all)
    if (!o.passed) md << "| " << o.category << "/" << o.name << " | " << OneLine(o.why) << " |\n";
  if (!report_file.empty()) std::ofstream(report_file) << md.str();
  for (const auto& [cat, c] : per_category) std::cout << cat << ": " << c.first << " / " << c.second << " pass\n";
  std::cout << "node (without training ops): " << node_pass << " / " << node_total << " (" << pct << ")\n";
  if (update && !expected_file.empty()) {
    std::ofstream out(expected_file);
    out << "# ONNX conformance cases that pass (onnx_conformance --update writes this file).\n";
    for (const auto& o : all)
      if (o.passed) out << o.category << "/" << o.name << "\n";
    std::cout << "wrote " << expected_file << "\n";
    return 0;
  }
  if (!new_passes.empty()) {
    std::cout << new_passes.size() << " case(s) pass that the expected list lacks (run with --update):\n";
    for (const auto& n : new_passes) std::cout << "  " << n << "\n";
  }
  if (!regressions.empty()) {
    std::cout << regressions.size() << " REGRESSION(S): expected to pass, failed:\n";
    for (const auto& r : regressions) std::cout << "  " << r << "\n";
    return 1;
  }
  return 0;
}
