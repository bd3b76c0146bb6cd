# Warnings for inferd's own targets (third-party headers are SYSTEM includes).
function(inferd_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter -Wnon-virtual-dtor)
endfunction()
