#include "repository/config_edit.h"

#include <google/protobuf/text_format.h>

#include <sstream>

#include "model_config.pb.h"
#include "repository/model_config.h"

namespace inferd {

namespace pb = google::protobuf;

Result<std::string> EditModelConfig(std::string_view text, std::string_view model_name, const ConfigEdit& edit) {
  config::ModelConfig c;
  if (!pb::TextFormat::ParseFromString(std::string(text), &c))
    return Status::InvalidArgument("the model's config.pbtxt does not parse");
  if (edit.instance_count) {
    if (*edit.instance_count < 1) return Status::InvalidArgument("instance count must be at least 1");
    c.clear_instance_group();
    auto* g = c.add_instance_group();
    g->set_count(*edit.instance_count);
    g->set_kind(config::ModelInstanceGroup::KIND_CPU);
  }
  if (edit.max_batch_size) {
    if (*edit.max_batch_size < 0) return Status::InvalidArgument("max_batch_size must be >= 0");
    c.set_max_batch_size(*edit.max_batch_size);
    if (c.has_dynamic_batching()) {
      auto* sizes = c.mutable_dynamic_batching()->mutable_preferred_batch_size();
      for (int i = sizes->size() - 1; i >= 0; --i)
        if (sizes->Get(i) > *edit.max_batch_size) sizes->erase(sizes->begin() + i);
    }
  }
  switch (edit.batching) {
    case ConfigEdit::Batching::kKeep:
      break;
    case ConfigEdit::Batching::kOff:
      c.clear_dynamic_batching();
      break;
    case ConfigEdit::Batching::kOn:
      c.mutable_dynamic_batching();
      if (edit.max_queue_delay_us)
        c.mutable_dynamic_batching()->set_max_queue_delay_microseconds(*edit.max_queue_delay_us);
      break;
  }
  for (const auto& [key, value] : edit.parameters) {
    if (value)
      (*c.mutable_parameters())[key].set_string_value(*value);
    else
      c.mutable_parameters()->erase(key);
  }
  std::string body;
  pb::TextFormat::PrintToString(c, &body);
  // What the server would refuse, refused here.
  INFERD_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelConfig(body, model_name, "the edited config"));
  (void)spec;
  std::string out;
  if (!edit.header.empty()) {
    std::istringstream lines(edit.header);
    for (std::string line; std::getline(lines, line);) out += line.empty() ? "#\n" : "# " + line + "\n";
  }
  return out + body;
}

}  // namespace inferd
