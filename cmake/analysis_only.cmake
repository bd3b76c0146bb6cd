# The clang build (`make thread-safety`, part of `make test`) exists for two things: clang's thread-safety
# analysis of every file (-Wthread-safety -Werror) and the libFuzzer targets. Only the fuzz targets and the
# libraries they link run; every other target is analysed only: its files go through clang with -fsyntax-only
# (every warning and the analysis, no code generation: ~40% less time per file) and it is not linked
# (cmake/analyse_only_compile.sh, cmake/analyse_only_link.sh). The release, ASan and TSan builds compile and link
# them all.

# Every target defined in `dir` and the folders below it.
function(_inferd_targets_below dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    _inferd_targets_below(${sub} below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# The project's own targets `target` links, directly or through others.
function(_inferd_link_closure target out)
  set(seen ${${out}})
  get_target_property(libs ${target} LINK_LIBRARIES)
  if(NOT libs)
    set(libs)
  endif()
  foreach(lib ${libs})
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" lib "${lib}")
    if(TARGET ${lib} AND NOT ${lib} IN_LIST seen)
      get_target_property(imported ${lib} IMPORTED)
      if(NOT imported)
        list(APPEND seen ${lib})
        set(closure ${seen})
        _inferd_link_closure(${lib} closure)
        set(seen ${closure})
      endif()
    endif()
  endforeach()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# Marks every target outside the fuzz targets' link closure analysis-only.
function(inferd_analysis_only fuzz_dir)
  _inferd_targets_below(${fuzz_dir} keep)
  set(closure ${keep})
  foreach(t ${keep})
    _inferd_link_closure(${t} closure)
  endforeach()
  _inferd_targets_below(${PROJECT_SOURCE_DIR} all)
  set(analysed)
  foreach(t ${all})
    get_target_property(type ${t} TYPE)
    if(${t} IN_LIST closure OR NOT type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|EXECUTABLE|SHARED_LIBRARY|MODULE_LIBRARY)$")
      continue()
    endif()
    set_target_properties(${t} PROPERTIES CXX_COMPILER_LAUNCHER ${PROJECT_SOURCE_DIR}/cmake/analyse_only_compile.sh)
    if(NOT type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY)$")
      set_target_properties(${t} PROPERTIES CXX_LINKER_LAUNCHER ${PROJECT_SOURCE_DIR}/cmake/analyse_only_link.sh)
    endif()
    list(APPEND analysed ${t})
  endforeach()
  list(LENGTH analysed n)
  message(STATUS "Analysis only (-fsyntax-only, not linked): ${n} targets; compiled for the fuzz targets: ${closure}")
endfunction()
