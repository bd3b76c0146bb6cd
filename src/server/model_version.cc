#include "server/model_version.h"

#include <filesystem>

#include "repository/model_config.h"
#include "scheduler/dynamic_batcher.h"
#include "server/warmup.h"

namespace inferd {

Result<std::shared_ptr<ModelVersion>> ModelVersion::Load(Backend& backend, ModelSpec spec, int64_t version,
                                                         const std::string& version_dir, const std::string& config_text,
                                                         const std::string& config_source, const Options& options) {
  if (spec.inputs.empty()) {
    INFERD_RETURN_IF_ERROR(backend.AutoComplete(version_dir, &spec).WithPrefix(config_source));
  }
  INFERD_RETURN_IF_ERROR(ValidateSpec(spec, config_source));
  if (spec.parameters.find("INTRA_OP_THREAD_COUNT") == spec.parameters.end()) {
    spec.parameters["INTRA_OP_THREAD_COUNT"] = std::to_string(std::max(1, options.default_intra_op_threads));
  }
  std::shared_ptr<ModelVersion> mv(new ModelVersion());
  mv->version_ = version;
  mv->version_str_ = std::to_string(version);
  mv->spec_ = std::move(spec);
  INFERD_ASSIGN_OR_RETURN(mv->model_, backend.Load(mv->spec_, version_dir));
  std::vector<std::unique_ptr<ModelInstance>> instances;
  for (int i = 0; i < mv->spec_.instance_count; ++i) {
    INFERD_ASSIGN_OR_RETURN(auto inst, mv->model_->CreateInstance(i));
    instances.push_back(std::move(inst));
  }
  mv->config_json_ = RenderModelConfigJson(config_text, mv->spec_);
  mv->stats_ = std::make_shared<ModelStats>(mv->spec_.name, mv->version_str_, mv->spec_.max_batch_size);
  const std::string model_dir = std::filesystem::path(version_dir).parent_path().string();
  auto samples_or = BuildWarmupSamples(mv->spec_, model_dir);
  if (!samples_or.ok()) return samples_or.status().WithPrefix(config_source);
  std::vector<WarmupSample> samples = std::move(*samples_or);
  DynamicBatcher::Options bo;
  bo.policy = BatchPolicy::FromSpec(mv->spec_, options.default_max_queue_size);
  bo.clock = options.clock;
  bo.stats = mv->stats_;
  if (!samples.empty()) {
    bo.warmup = [samples = std::make_shared<std::vector<WarmupSample>>(std::move(samples))](ModelInstance& inst) {
      return RunWarmup(inst, *samples);
    };
  }
  auto batcher = std::make_unique<DynamicBatcher>(std::move(bo), mv->spec_, std::move(instances));
  INFERD_RETURN_IF_ERROR(batcher->WaitWarmedUp());  // not READY before warmup ran on every instance
  mv->scheduler_ = std::move(batcher);
  return mv;
}

ModelVersion::~ModelVersion() {
  if (scheduler_) scheduler_->Shutdown();
  scheduler_.reset();
  model_.reset();
}

}  // namespace inferd
