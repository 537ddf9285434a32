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
add_test(NAME quant_dot_bench_smoke COMMAND quant_dot_bench --rows 16 --cols 512 --repeat 1 --prompt 8)

# `rlx quantize` (tests/quant/check_quantize.py): seeded Llama/Qwen models
# in safetensors and GGUF quantized to every type; the types chosen per
# tensor, the bytes against the reference quantizer (quantize_check.c),
# loading and generating through RLX, and bad inputs that must write
# nothing.  Skipped (77) without /usr/bin/python3 and NumPy.
add_executable(quantize_check ${CMAKE_CURRENT_SOURCE_DIR}/quant/quantize_check.c)
target_include_directories(quantize_check PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(quantize_check PRIVATE rlx_internal m)
add_test(NAME quantize_cli
  COMMAND sh -c "if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then exec /usr/bin/python3 \"$0\" \"$1\" \"$2\" \"$3\"; else echo 'skip: /usr/bin/python3 with NumPy is missing'; exit 77; fi"
          ${CMAKE_CURRENT_SOURCE_DIR}/quant/check_quantize.py $<TARGET_FILE:rlx_cli> $<TARGET_FILE:quantize_check> ${CMAKE_BINARY_DIR}/quantize-cli)
set_tests_properties(quantize_cli PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
# The same files in llama.cpp (node-llama-cpp's libllama, fetched once by
# tests/llm/fetch_llamacpp.sh; skipped, 77, when it cannot be had): its own
# quantizer picks the same type for every tensor, and it loads and runs
# RLX's files to the logits RLX computes.
add_test(NAME quantize_llamacpp
  COMMAND sh -c "if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then exec /usr/bin/python3 \"$0\" \"$1\" \"$2\" \"$3\" --llamacpp; else echo 'skip: /usr/bin/python3 with NumPy is missing'; exit 77; fi"
          ${CMAKE_CURRENT_SOURCE_DIR}/quant/check_quantize.py $<TARGET_FILE:rlx_cli> $<TARGET_FILE:quantize_check> ${CMAKE_BINARY_DIR}/quantize-llamacpp)
set_tests_properties(quantize_llamacpp PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
