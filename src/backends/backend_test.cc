#include "backends/backend.h"

#include <gtest/gtest.h>

#include "backends/identity/identity_backend.h"

namespace inferd {
namespace {

// A backend with names and platforms, built for a chosen interface version.
class NamedBackend final : public Backend {
 public:
  NamedBackend(std::string name, std::vector<std::string> aliases, std::vector<std::string> platforms,
               int version = kBackendInterfaceVersion)
      : name_(std::move(name)), aliases_(std::move(aliases)), platforms_(std::move(platforms)), version_(version) {}
  std::string_view name() const override { return name_; }
  std::vector<std::string> aliases() const override { return aliases_; }
  std::vector<std::string> platforms() const override { return platforms_; }
  int interface_version() const override { return version_; }
  Status AutoComplete(const std::string&, ModelSpec*) override { return Status::OK(); }
  Result<std::unique_ptr<LoadedModel>> Load(const ModelSpec&, const std::string&) override {
    return Status::Unimplemented("test backend");
  }

 private:
  std::string name_;
  std::vector<std::string> aliases_, platforms_;
  int version_;
};

BackendRegistry Registry() {
  BackendRegistry r;
  EXPECT_TRUE(r.Register(std::make_unique<NamedBackend>("pytorch", std::vector<std::string>{"torchscript"},
                                                        std::vector<std::string>{"pytorch_libtorch"}))
                  .ok());
  EXPECT_TRUE(r.Register(MakeIdentityBackend()).ok());
  return r;
}

TEST(BackendRegistry, ResolvesNamesAliasesAndPlatforms) {
  BackendRegistry r = Registry();
  EXPECT_EQ((*r.Resolve("torchscript", ""))->name(), "pytorch");
  EXPECT_EQ((*r.Resolve("identity", "ignored_when_backend_given"))->name(), "identity");
  EXPECT_EQ((*r.Resolve("", "pytorch_libtorch"))->name(), "pytorch");
  EXPECT_EQ((*r.Resolve("", ""))->name(), "pytorch");  // the default, as Triton infers from model.pt

  auto unknown = r.Resolve("onnxruntime", "");
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().message(),
            "unknown backend 'onnxruntime' (available: identity, pytorch (platforms: pytorch_libtorch))");
  EXPECT_EQ(r.Resolve("", "tensorflow_savedmodel").status().code(), StatusCode::kNotFound);
}

TEST(BackendRegistry, ResolveSpecFillsTheNameAndDefaultPlatform) {
  BackendRegistry r = Registry();
  ModelSpec spec;
  spec.backend = "torchscript";
  ASSERT_TRUE(r.ResolveSpec(&spec).ok());
  EXPECT_EQ(spec.backend, "pytorch");
  EXPECT_EQ(spec.platform, "pytorch_libtorch");

  ModelSpec bad;
  bad.platform = "onnxruntime_onnx";
  auto st = r.ResolveSpec(&bad).status();
  EXPECT_EQ(st.message().rfind("field 'platform': unknown platform 'onnxruntime_onnx'", 0), 0u) << st.message();
}

TEST(BackendRegistry, RefusesOtherInterfaceVersionsAndClashes) {
  BackendRegistry r = Registry();
  auto old = r.Register(std::make_unique<NamedBackend>("old", std::vector<std::string>{}, std::vector<std::string>{},
                                                       kBackendInterfaceVersion + 1));
  EXPECT_EQ(old.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(old.message().find("interface version"), std::string::npos);
  EXPECT_EQ(r.Register(std::make_unique<NamedBackend>("x", std::vector<std::string>{"torchscript"},
                                                      std::vector<std::string>{}))
                .code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(r.Register(std::make_unique<NamedBackend>("y", std::vector<std::string>{},
                                                      std::vector<std::string>{"pytorch_libtorch"}))
                .code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(r.Find("x"), nullptr);  // a refused backend leaves nothing behind
  EXPECT_EQ(r.Names(), (std::vector<std::string>{"identity", "pytorch"}));
}

}  // namespace
}  // namespace inferd
