# Warnings for inferd's own targets (third-party headers are SYSTEM includes).
# Under clang, the thread-safety analysis checks the TSA_* lock annotations
# (core/thread_annotations.h) and a violation fails the build.
function(inferd_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter -Wnon-virtual-dtor)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    target_compile_options(${target} PRIVATE -Wthread-safety -Werror=thread-safety)
  endif()
endfunction()
