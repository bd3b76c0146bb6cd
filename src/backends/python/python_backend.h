// The Python backend: Triton's Python backend API (model.py defining
// TritonPythonModel, `import triton_python_backend_utils as pb_utils`), each
// instance in its own worker process on Debian's /usr/bin/python3 (numpy),
// tensors through shared memory (python_worker.h). docs/python_backend.md.
//
// Config: backend: "python" (or a version folder holding model.py).
// Parameters: PYTHON_EXECUTABLE (default /usr/bin/python3),
// EXECUTE_TIMEOUT_SECONDS (300: a worker whose execute() runs longer is
// killed and restarted), INITIALIZE_TIMEOUT_SECONDS (600),
// FINALIZE_TIMEOUT_SECONDS (30), SHM_LIMIT_BYTES (1GiB: the most tensor bytes
// one exchange may hold in each direction), INTRA_OP_THREAD_COUNT (the
// worker's OMP/OpenBLAS/MKL threads).
#pragma once

#include <memory>

#include "backends/backend.h"

namespace inferd {

std::unique_ptr<Backend> MakePythonBackend();
Status RegisterPythonBackend(BackendRegistry* registry);

}  // namespace inferd
