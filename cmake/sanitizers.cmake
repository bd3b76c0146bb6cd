# ASan + UBSan for every target when INFERD_SANITIZE is on (the debug check
# build that `make test` runs). Errors abort: -fno-sanitize-recover=all.
if(INFERD_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
