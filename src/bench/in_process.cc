#include "bench/in_process.h"

#include <chrono>
#include <filesystem>

#include "bench/request_builder.h"
#include "repository/model_config.h"
#include "repository/repository.h"

namespace inferd::bench {

Result<std::vector<ReportRow>> RunInProcess(const InProcessOptions& o, const BackendRegistry& backends) {
  ModelRepository repo(o.repository);
  INFERD_ASSIGN_OR_RETURN(ModelSource src, repo.ReadModel(o.model));
  ModelSpec spec = src.spec;
  INFERD_ASSIGN_OR_RETURN(Backend * backend, backends.ResolveSpec(&spec, repo.NewestVersionFiles(src)));
  if (src.available_versions.empty()) return Status::NotFound("model '" + o.model + "' has no version");
  const std::string dir = (std::filesystem::path(src.dir) / std::to_string(src.available_versions.back())).string();
  if (spec.inputs.empty()) INFERD_RETURN_IF_ERROR(backend->AutoComplete(dir, &spec));
  INFERD_RETURN_IF_ERROR(ValidateSpec(spec, src.config_path));
  spec.parameters["INTRA_OP_THREAD_COUNT"] = std::to_string(o.intra_op_threads);
  INFERD_ASSIGN_OR_RETURN(auto model, backend->Load(spec, dir));
  INFERD_ASSIGN_OR_RETURN(auto instance, model->CreateInstance(0));
  instance->OnWorkerThreadStart();

  ModelDesc desc;
  desc.name = spec.name;
  desc.batched = spec.max_batch_size > 0;
  for (const auto& in : spec.inputs) {
    InputDesc d{in.name, in.dtype, {}};
    if (desc.batched) d.shape.push_back(-1);
    d.shape.insert(d.shape.end(), in.dims.begin(), in.dims.end());
    desc.inputs.push_back(std::move(d));
  }

  using Clock = std::chrono::steady_clock;
  std::vector<ReportRow> rows;
  for (int bs : o.batch_sizes) {
    if (desc.batched && bs > spec.max_batch_size) continue;
    std::vector<Tensor> inputs = RandomInputs(desc, bs, o.seed, o.random);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (spec.inputs[i].reshape) {  // what the server would hand the backend
        Shape s;
        if (desc.batched) s.push_back(bs);
        s.insert(s.end(), spec.inputs[i].reshape->begin(), spec.inputs[i].reshape->end());
        inputs[i].shape = s;
      }
    }
    auto run_for = [&](double seconds, std::vector<Sample>* samples) -> Status {
      const auto t0 = Clock::now();
      for (;;) {
        const auto start = Clock::now();
        auto out = instance->Execute(inputs);
        const auto end = Clock::now();
        if (!out.ok()) return out.status();
        const double at = std::chrono::duration<double>(end - t0).count();
        if (samples) samples->push_back({at, std::chrono::duration<double, std::micro>(end - start).count(), true});
        if (at >= seconds) return Status::OK();
      }
    };
    INFERD_RETURN_IF_ERROR(run_for(o.warmup_s, nullptr));
    std::vector<Sample> samples;
    INFERD_RETURN_IF_ERROR(run_for(o.window_s, &samples));
    ReportRow row;
    row.label = "in-process " + spec.name + " x" + std::to_string(o.intra_op_threads) + "thr";
    row.mode = "in-process";
    row.load = bs;
    row.protocol = "in-process";
    row.batch_size = bs;
    row.summary = Summarize(samples, 0, samples.empty() ? 0 : samples.back().end_s + 1e-9);
    row.stable = true;
    row.windows = 1;
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace inferd::bench
