// The Python worker's modules (src/backends/python/stub/*.py), compiled in
// (the build generates their definitions).
#pragma once

namespace inferd::python {

extern const char kPbUtilsSource[];  // triton_python_backend_utils.py
extern const char kWorkerSource[];   // inferd_python_worker.py

}  // namespace inferd::python
