// What inferd's own HTTP/2 gRPC port (h2_port.h) does with each call:
// ModelInfer served here, over the server facade (ServeModelInfer); every
// other method relayed, message by message, to gRPC's server in the same
// process (`in_process`: a generic stub on its in-process channel), which
// keeps the one implementation of each service.
#pragma once

#include <grpcpp/generic/generic_stub.h>

#include "frontends/grpc/h2_port.h"
#include "frontends/grpc/services.h"

namespace inferd::grpcfe {

// `ctx` and `in_process` must outlive the port.
H2Dispatch MakeH2Dispatch(ServiceContext* ctx, grpc::GenericStub* in_process);

}  // namespace inferd::grpcfe
