// Subcommands of the inferd binary. Each registers its flags on the CLI11 app
// and returns the process exit code when run.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace inferd::cli {

// Adds `serve` to `app`; `run` is set to the command's entry point.
void AddServeCommand(CLI::App& app, std::function<int()>* run);
// Adds `bench` (load generator and in-process baseline).
void AddBenchCommand(CLI::App& app, std::function<int()>* run);
// Adds `tune` (serving settings within a latency objective, and their cost).
void AddTuneCommand(CLI::App& app, std::function<int()>* run);
// Adds `batch` (a batch prediction job, in-process).
void AddBatchCommand(CLI::App& app, std::function<int()>* run);
// Adds `models` and `rollback` (clients of a running server).
void AddAdminCommands(CLI::App& app, std::function<int()>* run);

}  // namespace inferd::cli
