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
