# ASan + UBSan for every target when INFERD_SANITIZE is on (the debug check
# build that `make test` runs). Errors abort: -fno-sanitize-recover=all.
if(INFERD_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
# ThreadSanitizer (`make tsan`, part of `make test`): data races in inferd's
# own code fail the run; tsan.supp lists the third-party code it cannot see
# into, each entry explained.
if(INFERD_TSAN)
  if(INFERD_SANITIZE)
    message(FATAL_ERROR "INFERD_TSAN and INFERD_SANITIZE cannot be combined")
  endif()
  # -U__SANITIZE_THREAD__: headers of uninstrumented system libraries must
  # see the layout their .so was built with (protobuf's MapFieldBase adds
  # members under TSan: a mismatch crashed every config parse).
  # -Wno-tsan: Asio's fences (atomic_thread_fence) are not modelled by TSan.
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer -U__SANITIZE_THREAD__ -Wno-tsan)
  add_link_options(-fsanitize=thread)
endif()
# Code that protoc and grpc_cpp_plugin generate is compiled without sanitizers and without optimisation or debug
# information in the sanitizer builds, as the system's libprotobuf and libgrpc++ it calls are: its checks are
# protobuf's, and instrumented it was the slowest part of those builds (165 CPU s of the ASan build, 133 of the
# TSan one; model_config.pb.cc alone 36 s under ASan, 11 s without). Our code that uses the messages stays
# instrumented, the inline accessors from the generated headers included. Call it in the folder that compiles
# the files (source properties are per folder).
function(inferd_uninstrumented)
  if(INFERD_SANITIZE OR INFERD_TSAN)
    set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS -fno-sanitize=all -O0 -g0)
  endif()
endfunction()
