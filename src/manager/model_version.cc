#include "manager/model_version.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <optional>
#include <set>

#include "core/byte_size.h"
#include "lifecycle/allocator.h"
#include "manager/quantization_guard.h"
#include "manager/warmup.h"
#include "repository/model_config.h"
#include "repository/repository.h"

namespace inferd {

Result<bool> PinnedParameter(const ModelSpec& spec) {
  auto it = spec.parameters.find("pinned");
  if (it == spec.parameters.end()) return false;
  if (it->second == "true" || it->second == "1") return true;
  if (it->second == "false" || it->second == "0" || it->second.empty()) return false;
  return Status::InvalidArgument("parameter 'pinned' must be \"true\" or \"false\", not '" + it->second + "'");
}

Result<std::shared_ptr<ModelVersion>> ModelVersion::Load(Backend& backend, ModelSpec spec, int64_t version,
                                                         const Files& files, const std::string& config_text,
                                                         const std::string& config_source, const Options& options) {
  // Frameworks open files by path: a local copy of the version folder.
  auto local = files.fs->LocalPath(files.version_dir);
  if (!local.ok()) return local.status().WithPrefix(config_source + ": version folder " + files.version_dir);
  const std::string& version_dir = *local;
  if (spec.inputs.empty()) {
    INFERD_RETURN_IF_ERROR(backend.AutoComplete(version_dir, &spec).WithPrefix(config_source));
  }
  INFERD_RETURN_IF_ERROR(ValidateSpec(spec, config_source));
  if (options.check_spec) INFERD_RETURN_IF_ERROR(options.check_spec(spec).WithPrefix(config_source));
  if (spec.decoupled && !backend.supports_decoupled()) {
    return Status::InvalidArgument(config_source + ": model_transaction_policy.decoupled: backend '" +
                                   std::string(backend.name()) + "' cannot answer in parts (the python backend can)");
  }
  for (const auto& [key, value] : options.default_parameters) spec.parameters.try_emplace(key, value);
  if (spec.parameters.find("INTRA_OP_THREAD_COUNT") == spec.parameters.end()) {
    spec.parameters["INTRA_OP_THREAD_COUNT"] = std::to_string(std::max(1, options.default_intra_op_threads));
  }
  std::optional<uint64_t> size_override;
  if (auto it = spec.parameters.find("memory_bytes"); it != spec.parameters.end()) {
    auto bytes = ParseByteSize(it->second);
    if (!bytes.ok()) return bytes.status().WithPrefix(config_source + ": parameter 'memory_bytes'");
    size_override = *bytes;
  }
  std::shared_ptr<ModelVersion> mv(new ModelVersion());
  mv->version_ = version;
  mv->version_str_ = std::to_string(version);
  mv->spec_ = std::move(spec);
  // The backend's one-time state on this thread is not this model's size.
  thread_local std::set<const Backend*> prepared;
  if (prepared.insert(&backend).second) backend.PrepareLoadingThread();
  const auto before = allocator::ReadThreadCounters();
  mv->config_json_ = RenderModelConfigJson(config_text, mv->spec_);
  LoadContext context;
  context.submitter = options.submitter;
  context.config_json = mv->config_json_;
  // quantization "int8": the accuracy guard picks int8 or FP32 (quantization_guard.h).
  auto loaded = LoadWithQuantizationGuard(backend, mv->spec_, version_dir, context, *files.fs, files.model_dir,
                                          files.version_dir, &mv->quantization_);
  if (!loaded.ok()) return loaded.status();
  mv->model_ = std::move(*loaded);
  if (mv->quantization_.requested_int8() && mv->quantization_.serving != "int8") {
    spdlog::warn("model {} version {}: {}", mv->spec_.name, version, Describe(mv->quantization_));
  }
  std::vector<std::unique_ptr<ModelInstance>> instances;
  for (int i = 0; i < mv->spec_.instance_count; ++i) {
    INFERD_ASSIGN_OR_RETURN(auto inst, mv->model_->CreateInstance(i));
    instances.push_back(std::move(inst));
  }
  const auto after = allocator::ReadThreadCounters();
  if (size_override) {
    mv->resident_bytes_ = *size_override;
    mv->size_source_ = "config";
  } else if (before && after) {
    mv->resident_bytes_ = allocator::NetAllocated(*before, *after);
    mv->size_source_ = "measured";
  } else {
    mv->resident_bytes_ = TotalBytes(*files.fs, files.version_dir);
    mv->size_source_ = "files";
  }
  mv->stats_ = std::make_shared<ModelStats>(mv->spec_.name, mv->version_str_, mv->spec_.max_batch_size);
  auto samples_or = BuildWarmupSamples(mv->spec_, *files.fs, files.model_dir);
  if (!samples_or.ok()) return samples_or.status().WithPrefix(config_source);
  std::vector<WarmupSample> samples = std::move(*samples_or);
  SchedulerContext sc;
  sc.spec = &mv->spec_;
  sc.instances = std::move(instances);
  sc.clock = options.clock;
  sc.cpu_load = options.cpu_load;
  sc.stats = mv->stats_;
  sc.default_max_queue_size = options.default_max_queue_size;
  sc.submitter = options.submitter;
  sc.loras = options.loras;
  // Each instance's worker thread costs its stack and TLS (libtorch's is
  // large): measured on the thread after warmup and added to the size.
  auto thread_bytes = std::make_shared<std::atomic<uint64_t>>(0);
  sc.warmup = [samples = std::make_shared<std::vector<WarmupSample>>(std::move(samples)),
               thread_bytes](ModelInstance& inst) {
    Status st = RunWarmup(inst, *samples);
    thread_bytes->fetch_add(allocator::ThreadStackResidentBytes());
    return st;
  };
  if (!options.schedulers) return Status::Internal("no scheduler factory");
  auto scheduler = options.schedulers->Create(std::move(sc));
  if (!scheduler.ok()) return scheduler.status().WithPrefix(config_source);
  mv->scheduler_ = std::move(*scheduler);
  INFERD_RETURN_IF_ERROR(mv->scheduler_->WaitReady());  // not READY before warmup ran on every instance
  if (!size_override) mv->resident_bytes_ += thread_bytes->load();
  mv->loaded_at_ = options.clock->Now();
  mv->Touch(mv->loaded_at_);
  return mv;
}

std::string ModelVersion::load_note() const {
  std::string note = model_ ? model_->LoadNote() : "";
  const std::string q = Describe(quantization_);
  if (!q.empty()) note += (note.empty() ? "" : "; ") + q;
  return note;
}

ModelVersion::~ModelVersion() {
  if (scheduler_) scheduler_->Shutdown();
  scheduler_.reset();
  model_.reset();
}

}  // namespace inferd
