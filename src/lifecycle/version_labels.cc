#include "lifecycle/version_labels.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace inferd {

std::optional<int64_t> VersionLabels::Find(std::string_view label) const {
  auto it = labels.find(label);
  if (it == labels.end()) return std::nullopt;
  return it->second;
}

bool VersionLabels::RecordDefault(int64_t version) {
  if (!history.empty() && history.back() == version) return false;
  history.push_back(version);
  if (history.size() > kMaxDefaultHistory)
    history.erase(history.begin(), history.begin() + static_cast<ptrdiff_t>(history.size() - kMaxDefaultHistory));
  return true;
}

void VersionLabels::TruncateAfter(int64_t target) {
  auto it = std::find(history.rbegin(), history.rend(), target);
  if (it == history.rend()) return;
  history.erase(it.base(), history.end());
}

Status ValidateLabelName(std::string_view label) {
  if (label.empty() || label.size() > 64) return Status::InvalidArgument("label names have 1 to 64 characters");
  bool all_digits = true;
  for (char c : label) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (!ok) return Status::InvalidArgument("invalid label '" + std::string(label) + "': use [A-Za-z0-9_.-]");
    all_digits = all_digits && c >= '0' && c <= '9';
  }
  if (all_digits)
    return Status::InvalidArgument("label '" + std::string(label) + "' is a number: numbers are versions");
  return Status::OK();
}

Result<VersionLabels> ParseVersionLabelsJson(std::string_view json) {
  rapidjson::Document d;
  d.Parse<rapidjson::kParseIterativeFlag>(json.data(), json.size());  // no recursion on deep nesting
  if (d.HasParseError() || !d.IsObject()) return Status::InvalidArgument("not a JSON object");
  VersionLabels out;
  if (d.HasMember("labels")) {
    const auto& l = d["labels"];
    if (!l.IsObject()) return Status::InvalidArgument("'labels' must be an object of label: version");
    for (auto it = l.MemberBegin(); it != l.MemberEnd(); ++it) {
      std::string name(it->name.GetString(), it->name.GetStringLength());
      INFERD_RETURN_IF_ERROR(ValidateLabelName(name));
      if (!it->value.IsInt64() || it->value.GetInt64() < 1)
        return Status::InvalidArgument("label '" + name + "' must map to a version number >= 1");
      out.labels[name] = it->value.GetInt64();
    }
  }
  if (d.HasMember("history")) {
    const auto& h = d["history"];
    if (!h.IsArray()) return Status::InvalidArgument("'history' must be an array of versions");
    for (const auto& v : h.GetArray()) {
      if (!v.IsInt64() || v.GetInt64() < 1) return Status::InvalidArgument("'history' entries are versions >= 1");
      out.RecordDefault(v.GetInt64());
    }
  }
  return out;
}

std::string VersionLabelsToJson(const VersionLabels& labels) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("labels");
  w.StartObject();
  for (const auto& [k, v] : labels.labels) {
    w.Key(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
    w.Int64(v);
  }
  w.EndObject();
  w.Key("history");
  w.StartArray();
  for (int64_t v : labels.history) w.Int64(v);
  w.EndArray();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

Result<VersionLabels> ReadVersionLabels(const Filesystem& fs, const std::string& model_dir) {
  const std::string path = model_dir + "/" + kVersionLabelsFile;
  if (!fs.IsFile(path)) return VersionLabels{};
  auto text = fs.ReadFile(path);
  if (!text.ok()) return Status::Unavailable(path + ": cannot be read: " + text.status().message());
  auto r = ParseVersionLabelsJson(*text);
  if (!r.ok()) return r.status().WithPrefix(path);
  return r;
}

Result<VersionLabels> LoadVersionLabels(const ControlStateStore& store, const std::string& model, const Filesystem& fs,
                                        const std::string& model_dir) {
  INFERD_ASSIGN_OR_RETURN(std::optional<std::string> doc, store.Get(model, "labels"));
  if (!doc) return ReadVersionLabels(fs, model_dir);
  auto r = ParseVersionLabelsJson(*doc);
  if (!r.ok()) return r.status().WithPrefix(store.Describe() + ": labels of model '" + model + "'");
  return r;
}

Status SaveVersionLabels(ControlStateStore& store, const std::string& model, const VersionLabels& labels) {
  return store.Put(model, "labels", VersionLabelsToJson(labels) + "\n");
}

}  // namespace inferd
