// inferd: a model server. `inferd --help` lists the subcommands.
#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"inferd: serve machine-learning models over KServe v2 / Triton and TF Serving REST"};
  app.set_version_flag("--version", "inferd 0.1.0");
  app.require_subcommand(1);
  std::function<int()> run;
  inferd::cli::AddServeCommand(app, &run);
  inferd::cli::AddBenchCommand(app, &run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return run ? run() : 1;
}
