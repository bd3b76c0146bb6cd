// OpenBLAS thread count for the libtorch backends.
//
// Debian's libtorch calls OpenBLAS (the pthreads build) for its GEMMs, and
// OpenBLAS keeps its own thread pool beside libtorch's OpenMP pool. Both spin
// while they wait, so on a small machine a model that alternates GEMMs with
// other parallel ops runs the two pools against each other: a TorchScript
// transformer encoder served at 54 sequences/s with OpenBLAS on 2 threads and
// 220/s with it on 1 (2 cores, docs/benchmarks.md). inferd parallelises a
// call through the instance's intra-op threads (OpenMP) and keeps OpenBLAS
// on the calling thread.
// Thread-safety: may be called from any thread; OpenBLAS's setting is
// process-wide.
#pragma once

namespace inferd::aten {

// Sets OpenBLAS to one thread when the process has OpenBLAS loaded (found by
// symbol; a no-op otherwise). Returns whether it did.
bool KeepBlasOnCallingThread();

// at::set_num_threads(n) for the calling instance thread. libtorch throws when
// it cannot set up its thread pool (cpuinfo cannot read /proc/cpuinfo, as in a
// chroot without /proc); that is logged and false returned instead of the
// exception ending the thread, and with it the process: the model's calls
// then fail with libtorch's error, answered per request.
bool SetIntraOpThreads(int n);

}  // namespace inferd::aten
