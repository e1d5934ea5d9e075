# AddressSanitizer twins of the engine and of the tests that run epochs back
# to back (tst_cluster, tst_strategies): the same sources compiled again with
# -fsanitize=address, so a hook, callback or thread that outlives its
# strategy or epoch is a reported use-after-free in ctest, not a crash in a
# classroom. LibTorch and Qt stay uninstrumented (Debian's builds).
#
# SMOL_ASAN_TESTS=OFF skips them (a developer's quick build); CI builds them.
option(SMOL_ASAN_TESTS "Build and run the AddressSanitizer twins of the cluster and strategy tests" ON)

set(SMOL_ASAN_FLAGS -fsanitize=address -fno-omit-frame-pointer)

# smol_asan_twin(TARGET): TARGET_asan from TARGET's sources and compile
# settings, linked against the _asan twin of every library that has one.
function(smol_asan_twin target)
  if(NOT SMOL_ASAN_TESTS)
    return()
  endif()
  get_target_property(type ${target} TYPE)
  get_target_property(sources ${target} SOURCES)
  if(type STREQUAL "EXECUTABLE")
    add_executable(${target}_asan ${sources})
  else()
    add_library(${target}_asan STATIC ${sources})
  endif()
  foreach(prop INCLUDE_DIRECTORIES COMPILE_DEFINITIONS)
    get_target_property(value ${target} ${prop})
    if(value)
      set_property(TARGET ${target}_asan PROPERTY ${prop} ${value})
    endif()
  endforeach()
  get_target_property(iface ${target} INTERFACE_INCLUDE_DIRECTORIES)
  if(iface)
    set_property(TARGET ${target}_asan PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${iface})
  endif()
  get_target_property(libs ${target} LINK_LIBRARIES)
  set(twinLibs)
  foreach(lib IN LISTS libs)
    if(TARGET ${lib}_asan)
      list(APPEND twinLibs ${lib}_asan)
    else()
      list(APPEND twinLibs ${lib})
    endif()
  endforeach()
  target_link_libraries(${target}_asan PUBLIC ${twinLibs})
  target_compile_options(${target}_asan PRIVATE ${SMOL_ASAN_FLAGS} -O1)
  target_link_options(${target}_asan PUBLIC -fsanitize=address)
endfunction()
