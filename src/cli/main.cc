// inferd: a model server. `inferd --help` lists the subcommands.
#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>

#include "cli/commands.h"
#include "core/blas_core.h"

#ifdef INFERD_WITH_JEMALLOC
// jemalloc's start-up options (MALLOC_CONF in the environment still applies on
// top). Time-based purging ("decay") is off: with it on, libtorch's per-forward
// activation buffers were returned to the OS and faulted back in on every call
// (ResNet-18 ran 4x slower, measured). inferd purges explicitly instead, after
// a model is unloaded, which is when memory should go back (docs/memory.md).
extern "C" {
extern const char* malloc_conf;
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
}
#endif

int main(int argc, char** argv) {
  // Before any thread of inferd's runs: OpenBLAS on the kernels this CPU has (core/blas_core.h).
  inferd::UseBestBlasKernels();
  CLI::App app{
      "inferd: serve machine-learning models over KServe v2 / Triton REST and gRPC, and TF Serving REST\n"
      "  inferd serve --model-repository DIR   HTTP on :8000, gRPC on :8001, metrics on :8002\n"
      "  inferd serve --help                   every serving flag (docs/cli.md)"};
  app.set_version_flag("--version", "inferd 0.1.0");
  app.require_subcommand(1);
  std::function<int()> run;
  inferd::cli::AddServeCommand(app, &run);
  inferd::cli::AddBenchCommand(app, &run);
  inferd::cli::AddBatchCommand(app, &run);
  inferd::cli::AddTuneCommand(app, &run);
  inferd::cli::AddAdminCommands(app, &run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a bad flag or value is a usage error: exit 2, like every flag the commands
    // check themselves (CLI11's own codes, 105 for a value out of range, said nothing more).
    return app.exit(e) == 0 ? 0 : 2;
  }
  return run ? run() : 1;
}
