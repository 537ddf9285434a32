# cuda.cmake - the GPU parity test (tests/gpu/cuda_parity.c): every op and
# fused op on CUDA against the CPU reference.  Registered always; where CUDA
# is not built or no device is usable it prints the reason and exits 77,
# which ctest reports as skipped.  tests/gpu/run_all.sh runs it on the GPU
# machine.
add_executable(test_cuda_parity ${CMAKE_CURRENT_SOURCE_DIR}/gpu/cuda_parity.c)
target_include_directories(test_cuda_parity PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(test_cuda_parity PRIVATE rlx_internal m)
add_test(NAME test_cuda_parity COMMAND test_cuda_parity)
set_tests_properties(test_cuda_parity PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800)
# Every kernel launched through cu_launch may start while the one before it
# drains, so each must begin with cu_grid_wait(): checked on the sources,
# with or without a GPU.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME cuda_kernel_lint COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/gpu/lint_kernels.py
                                         ${CMAKE_SOURCE_DIR}/src/backends/cuda)
endif()
# The generated elementwise-chain kernels built by NVRTC for sm_80 and sm_90
# with every float op (no GPU needed; skipped, 77, without the CUDA backend
# or NVRTC).
add_executable(test_cuda_jit ${CMAKE_CURRENT_SOURCE_DIR}/gpu/cuda_jit.c)
target_include_directories(test_cuda_jit PRIVATE ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(test_cuda_jit PRIVATE rlx_internal ${CMAKE_DL_LIBS})
add_test(NAME test_cuda_jit COMMAND test_cuda_jit)
set_tests_properties(test_cuda_jit PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
# Training on CUDA against the CPU (tests/gpu/cuda_train.c): optimizer
# steps, the gradient of every op family, a small decoder trained 20 steps.
# Skipped (77) like the parity test where no CUDA device is usable.  Its
# gradient cases are tests/support/grad_cases.h, test_grad's too.
add_executable(test_cuda_train ${CMAKE_CURRENT_SOURCE_DIR}/gpu/cuda_train.c)
target_include_directories(test_cuda_train PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(test_cuda_train PRIVATE rlx_internal m)
add_test(NAME test_cuda_train COMMAND test_cuda_train)
set_tests_properties(test_cuda_train PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800)

# The quantized ops on CUDA (tests/gpu/cuda_quant.c): dequantize bit for bit
# against the CPU, qmatmul's three paths against float64 and the CPU.
# Skipped (77) where no CUDA device is usable.
add_executable(test_cuda_quant ${CMAKE_CURRENT_SOURCE_DIR}/gpu/cuda_quant.c)
target_include_directories(test_cuda_quant PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(test_cuda_quant PRIVATE rlx_internal m)
add_test(NAME test_cuda_quant COMMAND test_cuda_quant)
set_tests_properties(test_cuda_quant PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800)
