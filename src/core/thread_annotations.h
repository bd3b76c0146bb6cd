// Clang thread-safety annotations (-Wthread-safety), as leveldb and Abseil use
// them. They document and check which mutex guards which state: a field marked
// TSA_GUARDED_BY(mu_) may only be touched with mu_ held, a method marked
// TSA_REQUIRES(mu_) only called with it held. Under GCC they expand to nothing.
// Use them with inferd::Mutex / SharedMutex (core/mutex.h): libstdc++'s
// std::mutex carries no annotations.
#pragma once

#if defined(__clang__)
#define INFERD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define INFERD_THREAD_ANNOTATION(x)
#endif

#define TSA_CAPABILITY(x) INFERD_THREAD_ANNOTATION(capability(x))
#define TSA_SCOPED_CAPABILITY INFERD_THREAD_ANNOTATION(scoped_lockable)
#define TSA_GUARDED_BY(x) INFERD_THREAD_ANNOTATION(guarded_by(x))
#define TSA_PT_GUARDED_BY(x) INFERD_THREAD_ANNOTATION(pt_guarded_by(x))
#define TSA_ACQUIRED_BEFORE(...) INFERD_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define TSA_ACQUIRED_AFTER(...) INFERD_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define TSA_REQUIRES(...) INFERD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define TSA_REQUIRES_SHARED(...) INFERD_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define TSA_ACQUIRE(...) INFERD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define TSA_ACQUIRE_SHARED(...) INFERD_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define TSA_RELEASE(...) INFERD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TSA_RELEASE_SHARED(...) INFERD_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define TSA_RELEASE_GENERIC(...) INFERD_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TSA_TRY_ACQUIRE(...) INFERD_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define TSA_TRY_ACQUIRE_SHARED(...) INFERD_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))
#define TSA_EXCLUDES(...) INFERD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define TSA_ASSERT_CAPABILITY(x) INFERD_THREAD_ANNOTATION(assert_capability(x))
#define TSA_RETURN_CAPABILITY(x) INFERD_THREAD_ANNOTATION(lock_returned(x))
#define TSA_NO_THREAD_SAFETY_ANALYSIS INFERD_THREAD_ANNOTATION(no_thread_safety_analysis)
