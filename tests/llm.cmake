# Decoder-LLM references (tests/llm): the float64 NumPy forward's own
# checks (causality, GQA, both RoPE forms, the GGUF q/k permutation, tied
# and untied heads).  Skipped (77) without /usr/bin/python3 and NumPy.
add_test(NAME llm_reference_selftest
  COMMAND sh -c "if [ -x /usr/bin/python3 ]; then exec /usr/bin/python3 \"$0\" selftest; else echo 'skip: /usr/bin/python3 is missing'; exit 77; fi"
          ${CMAKE_CURRENT_SOURCE_DIR}/llm/reference.py)
set_tests_properties(llm_reference_selftest PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
