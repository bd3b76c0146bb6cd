// One loaded ModelVersion for unit tests of the request path's parts (the
// pipeline's stages): its config from text, its folder on an in-memory
// repository, the built-in schedulers, the identity backend by default
// (outputs = inputs).
//
// Ownership: a TestVersion owns what the version uses (backend, schedulers,
// filesystem, clock); the version is released first. Thread-safety: as
// ModelVersion.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "backends/identity/identity_backend.h"
#include "core/clock.h"
#include "manager/model_version.h"
#include "repository/model_config.h"
#include "scheduler/scheduler_factory.h"
#include "testing/memory_filesystem.h"

namespace inferd::testing {

class TestVersion {
 public:
  // `config`: config.pbtxt text of model `name`.
  static Result<std::unique_ptr<TestVersion>> Load(const std::string& name, const std::string& config,
                                                   int64_t version = 1, std::unique_ptr<Backend> backend = nullptr) {
    std::unique_ptr<TestVersion> t(new TestVersion(backend ? std::move(backend) : MakeIdentityBackend()));
    const std::string model_dir = "/models/" + name, version_dir = model_dir + "/" + std::to_string(version);
    t->fs_.Put(model_dir + "/config.pbtxt", config);
    t->fs_.MakeDirectory(version_dir);
    INFERD_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelConfig(config, name, "config.pbtxt"));
    ModelVersion::Options options;
    options.clock = &t->clock_;
    options.schedulers = &t->schedulers_;
    INFERD_ASSIGN_OR_RETURN(
        t->version_, ModelVersion::Load(*t->backend_, std::move(spec), version, {&t->fs_, model_dir, version_dir},
                                        config, "config.pbtxt", options));
    return t;
  }
  ~TestVersion() { version_.reset(); }

  const std::shared_ptr<ModelVersion>& version() const { return version_; }

 private:
  explicit TestVersion(std::unique_ptr<Backend> backend)
      : backend_(std::move(backend)), schedulers_(SchedulerFactory::WithBuiltins()) {}

  SteadyClock clock_;
  MemoryFilesystem fs_;
  std::unique_ptr<Backend> backend_;
  SchedulerFactory schedulers_;
  std::shared_ptr<ModelVersion> version_;
};

}  // namespace inferd::testing
