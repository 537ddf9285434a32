# quant.cmake - the quantized types against ggml (tests/quant/quant_ggml.c:
# the prebuilt libggml-base.so of node-llama-cpp, fetched once by
# tests/llm/fetch_llamacpp.sh into RLX_LLAMACPP_CACHE or
# third_party_models/node-llama-cpp, loaded with dlopen; skipped, exit 77
# with the reason, when it cannot be had), and the dot-product benchmark's
# smoke run.
add_executable(quant_ggml ${CMAKE_CURRENT_SOURCE_DIR}/quant/quant_ggml.c)
target_include_directories(quant_ggml PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(quant_ggml PRIVATE rlx_internal m ${CMAKE_DL_LIBS})
add_test(NAME quant_ggml_parity
  COMMAND sh -c "cache=\${RLX_LLAMACPP_CACHE:-$1}; sh \"$0\" \"$cache\" || exit $?; exec \"$2\" \"$cache/lib/libggml-base.so\""
          ${CMAKE_CURRENT_SOURCE_DIR}/llm/fetch_llamacpp.sh ${CMAKE_SOURCE_DIR}/third_party_models/node-llama-cpp
          $<TARGET_FILE:quant_ggml>)
set_tests_properties(quant_ggml_parity PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)

# bench/quant_dot_bench.c: run by hand; a tiny run keeps it working.
add_executable(quant_dot_bench ${CMAKE_SOURCE_DIR}/bench/quant_dot_bench.c)
target_include_directories(quant_dot_bench PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(quant_dot_bench PRIVATE rlx_internal m)
add_test(NAME quant_dot_bench_smoke COMMAND quant_dot_bench --rows 16 --cols 512 --repeat 1)
