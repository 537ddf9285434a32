# cuda.cmake - the CUDA backend, built when nvcc is found (optional otherwise).
# Kernels: sm_80 and sm_90a machine code plus sm_90 PTX for newer parts.
include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(STATUS "RLX: nvcc not found; building without the CUDA backend")
  return()
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  # 90a: the sm_90 machine code with the Hopper-only instructions (wgmma) our GEMM uses
  set(CMAKE_CUDA_ARCHITECTURES "80-real;90a-real;90-virtual")
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)

file(GLOB RLX_CUDA_SOURCES CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cuda/*.c
  ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/cuda/*.cu)
target_sources(rlx_objects PRIVATE ${RLX_CUDA_SOURCES})
# -Wall -Wextra reach the host compiler through nvcc; nvcc itself takes neither.
set_source_files_properties(${RLX_CUDA_SOURCES} PROPERTIES COMPILE_OPTIONS
  "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra;--expt-relaxed-constexpr;-lineinfo>")
set_target_properties(rlx_objects PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}"
  CUDA_SEPARABLE_COMPILATION OFF)
target_link_libraries(rlx_objects PRIVATE CUDA::cudart_static CUDA::cublasLt CUDA::cublas)
# The elementwise math's header, embedded for the kernels NVRTC builds at
# run time (src/backends/cuda/jit.cu; NVRTC itself is opened with dlopen).
set(RLX_OP_MATH_TEXT ${CMAKE_CURRENT_BINARY_DIR}/generated/rlx_op_math_text.h)
add_custom_command(OUTPUT ${RLX_OP_MATH_TEXT}
  COMMAND ${CMAKE_COMMAND} -DINPUT=${CMAKE_CURRENT_SOURCE_DIR}/src/ir/op_math.h -DOUTPUT=${RLX_OP_MATH_TEXT}
    -DNAME=rlx_op_math_text -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_text.cmake
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/ir/op_math.h ${CMAKE_CURRENT_SOURCE_DIR}/cmake/embed_text.cmake
  COMMENT "Embedding src/ir/op_math.h for NVRTC")
target_sources(rlx_objects PRIVATE ${RLX_OP_MATH_TEXT})
target_include_directories(rlx_objects PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/generated)
list(APPEND RLX_FEATURE_DEFS RLX_HAVE_CUDA=1)
if("${CMAKE_CUDA_ARCHITECTURES}" MATCHES "90a")
  target_compile_definitions(rlx_objects PRIVATE RLX_HAVE_SM90A=1)
endif()
set(RLX_HAVE_CUDA ON CACHE INTERNAL "CUDA backend built")
message(STATUS "RLX: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES})")
