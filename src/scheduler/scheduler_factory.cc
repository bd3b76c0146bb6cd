#include "scheduler/scheduler_factory.h"

#include "scheduler/dynamic_batcher.h"
#include "scheduler/ensemble_scheduler.h"
#include "scheduler/generative_scheduler.h"

namespace inferd {

SchedulerFactory SchedulerFactory::WithBuiltins(bool batch_scheduling) {
  SchedulerFactory f;
  f.Register("dynamic", [batch_scheduling](SchedulerContext c) -> Result<std::unique_ptr<Scheduler>> {
    DynamicBatcher::Options o;
    o.policy = BatchPolicy::FromSpec(*c.spec, c.default_max_queue_size);
    o.clock = c.clock;
    o.cpu_load = c.cpu_load;
    o.stats = std::move(c.stats);
    o.warmup = std::move(c.warmup);
    o.batch_scheduling = batch_scheduling;
    return std::unique_ptr<Scheduler>(new DynamicBatcher(std::move(o), *c.spec, std::move(c.instances)));
  });
  f.Register("ensemble", MakeEnsembleScheduler);
  f.Register("generative", MakeGenerativeScheduler);
  return f;
}

void SchedulerFactory::Register(std::string kind, Builder builder) { builders_[std::move(kind)] = std::move(builder); }

Result<std::unique_ptr<Scheduler>> SchedulerFactory::Create(SchedulerContext context) const {
  const std::string kind = SchedulerKind(*context.spec);
  auto it = builders_.find(kind);
  if (it == builders_.end()) {
    return Status::InvalidArgument("model '" + context.spec->name + "' needs a '" + kind +
                                   "' scheduler, which this server does not have");
  }
  return it->second(std::move(context));
}

std::string SchedulerKind(const ModelSpec& spec) {
  if (spec.ensemble) return "ensemble";
  return spec.scheduler_kind.empty() ? "dynamic" : spec.scheduler_kind;
}

}  // namespace inferd
