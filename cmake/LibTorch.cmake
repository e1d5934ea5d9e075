# Debian's libtorch-dev ships no TorchConfig.cmake: build an imported target
# from the installed headers and libraries. c10d's ProcessGroupGloo lives in
# libtorch_cpu and needs USE_C10D_GLOO plus the headers from libgloo-dev.
find_path(TORCH_API_INCLUDE_DIR torch/torch.h
  PATHS /usr/include/torch/csrc/api/include NO_DEFAULT_PATH)
find_library(TORCH_LIBRARY torch)
find_library(TORCH_CPU_LIBRARY torch_cpu)
find_library(C10_LIBRARY c10)
find_path(GLOO_INCLUDE_DIR gloo/algorithm.h)
if(NOT TORCH_API_INCLUDE_DIR OR NOT TORCH_LIBRARY OR NOT TORCH_CPU_LIBRARY OR NOT C10_LIBRARY)
  message(FATAL_ERROR "LibTorch not found: install Debian's libtorch-dev (scripts/setup does)")
endif()
if(NOT GLOO_INCLUDE_DIR)
  message(FATAL_ERROR "Gloo headers not found: install Debian's libgloo-dev (scripts/setup does)")
endif()
add_library(smol_torch INTERFACE)
target_include_directories(smol_torch SYSTEM INTERFACE ${TORCH_API_INCLUDE_DIR} ${GLOO_INCLUDE_DIR})
target_link_libraries(smol_torch INTERFACE ${TORCH_LIBRARY} ${TORCH_CPU_LIBRARY} ${C10_LIBRARY} Threads::Threads)
target_compile_definitions(smol_torch INTERFACE USE_C10D_GLOO USE_DISTRIBUTED)
