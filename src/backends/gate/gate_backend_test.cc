#include "backends/gate/gate_backend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <thread>

#include "testing/test_requests.h"

namespace inferd {
namespace {

ModelSpec Held(std::string name, std::string hold_ms = "60000") {
  ModelSpec s;
  s.name = std::move(name);
  s.max_batch_size = 8;
  s.inputs.push_back({"x", DataType::kFp32, {1}});
  s.outputs.push_back({"y", DataType::kFp32, {1}});
  s.parameters["max_hold_ms"] = std::move(hold_ms);
  return s;
}

ModelSpec Control(std::string gate) {
  ModelSpec s;
  s.name = gate + "_ctl";
  s.inputs.push_back({"open", DataType::kInt32, {1}});
  s.outputs.push_back({"waiting", DataType::kInt32, {1}});
  s.parameters["role"] = "control";
  s.parameters["gate"] = std::move(gate);
  return s;
}

// Sends `open` to a control instance; returns `waiting`.
int32_t Send(ModelInstance& control, int32_t open) {
  Tensor t = Tensor::Copy("open", DataType::kInt32, {1}, std::as_bytes(std::span<const int32_t>(&open, 1)));
  auto out = control.Execute({t});
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return -1;
  int32_t waiting = 0;
  std::memcpy(&waiting, (*out)[0].data, 4);
  return waiting;
}

TEST(GateBackend, HeldExecutionsRunWhenTheGateOpens) {
  auto backend = MakeGateBackend();
  auto held = backend->Load(Held("held"), "");
  auto ctl = backend->Load(Control("held"), "");
  ASSERT_TRUE(held.ok() && ctl.ok());
  auto hi = (*held)->CreateInstance(0);
  auto ci = (*ctl)->CreateInstance(0);
  ASSERT_TRUE(hi.ok() && ci.ok());
  EXPECT_EQ(Send(**ci, -1), 0);
  auto run = std::async(std::launch::async, [&] { return (*hi)->Execute({testing::F32("x", {1, 1}, {7})}); });
  // Bounded: the execution reaches the closed gate and stays there.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (Send(**ci, -1) != 1 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ASSERT_EQ(Send(**ci, -1), 1);
  EXPECT_EQ(run.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  Send(**ci, 1);
  ASSERT_EQ(run.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  auto out = run.get();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].name, "y");
  EXPECT_EQ(testing::ToFloats((*out)[0]), (std::vector<float>{7}));
  // Open: executions pass at once; closed again with no hold allowed: they fail.
  EXPECT_TRUE((*hi)->Execute({testing::F32("x", {1, 1}, {1})}).ok());
  EXPECT_EQ(Send(**ci, 0), 0);
  auto strict = backend->Load(Held("held", "0"), "");
  ASSERT_TRUE(strict.ok());
  auto si = (*strict)->CreateInstance(0);
  auto failed = (*si)->Execute({testing::F32("x", {1, 1}, {1})});
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(failed.status().message(), "gate 'held' stayed closed for 0 ms (max_hold_ms)");
}

TEST(GateBackend, BadConfigsAreRefused) {
  auto backend = MakeGateBackend();
  ModelSpec bad_role = Held("m");
  bad_role.parameters["role"] = "both";
  EXPECT_EQ(backend->Load(bad_role, "").status().message(),
            "gate model 'm': role must be 'held' or 'control', not 'both'");
  EXPECT_EQ(backend->Load(Held("m", "soon"), "").status().message(),
            "gate model 'm': max_hold_ms must be a non-negative integer");
  ModelSpec ctl = Control("g");
  ctl.max_batch_size = 4;
  EXPECT_NE(backend->Load(ctl, "").status().message().find("role 'control' needs max_batch_size 0"), std::string::npos);
  ModelSpec mismatch = Held("m");
  mismatch.outputs[0].dtype = DataType::kInt32;
  EXPECT_EQ(backend->Load(mismatch, "").status().message(),
            "gate model 'm': output 'y' must have the datatype of input 'x'");
}

}  // namespace
}  // namespace inferd
