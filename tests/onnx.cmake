# ONNX importer tests: unit tests on generated models (test_onnx_import.c,
# registered by the glob in CMakeLists.txt) and the backend-test suite.
if(TARGET test_onnx_import)
  set_tests_properties(test_onnx_import PROPERTIES SKIP_RETURN_CODE 77)
endif()
if(RLX_HAVE_ONNX)
  # 1056 pass today; 24 sequence and optional cases among them need their
  # value files read (onnx-data.proto, cmake/onnx.cmake)
  if(RLX_ONNX_DATA_SOURCES)
    set(_rlx_onnx_floor 1046)
  else()
    set(_rlx_onnx_floor 1022)
  endif()
  add_test(NAME onnx_conformance
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/onnx/conformance.sh $<TARGET_FILE:rlx_cli> ${_rlx_onnx_floor}
            ${CMAKE_BINARY_DIR}/onnx_conformance.log)
  set_tests_properties(onnx_conformance PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800)
endif()
# Cases for opsets 18-21 (tests/onnx/make_opset18_cases.py writes them from
# NumPy references; Debian's test data stops at opset 17): every one passes.
if(RLX_HAVE_ONNX)
  add_test(NAME onnx_opset18_cases
    COMMAND sh -c "out=$($0 onnx-test $1 2>&1); echo \"$out\" | grep -v '^PASS'; echo \"$out\" | tail -1 | grep -Eq '^[1-9][0-9]* passed, 0 failed, 0 skipped$'"
            $<TARGET_FILE:rlx_cli> ${CMAKE_CURRENT_SOURCE_DIR}/onnx/opset18)
endif()
# Staged runs (rlx_model_run) of the cases whose ops need values at import:
# every one passes.
if(RLX_HAVE_ONNX)
  add_test(NAME onnx_staged_cases
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/onnx/staged_cases.sh $<TARGET_FILE:rlx_cli>)
  set_tests_properties(onnx_staged_cases PROPERTIES SKIP_RETURN_CODE 77)
endif()
# Sequence and optional cases beyond Debian's data (tests/onnx/make_sequence_cases.py
# writes them from NumPy references): every one passes.  Their sequence and
# optional files need onnx-data.proto.
if(RLX_HAVE_ONNX AND RLX_ONNX_DATA_SOURCES)
  add_test(NAME onnx_sequence_cases
    COMMAND sh -c "out=$($0 onnx-test $1 2>&1); echo \"$out\" | grep -v '^PASS'; echo \"$out\" | tail -1 | grep -Eq '^[1-9][0-9]* passed, 0 failed, 0 skipped$'"
            $<TARGET_FILE:rlx_cli> ${CMAKE_CURRENT_SOURCE_DIR}/onnx/sequence)
endif()
# The importer's libFuzzer target for a bounded time (its own clang build;
# once per configuration set, so not in the sanitizer build).
if(RLX_HAVE_ONNX AND NOT RLX_SANITIZE)
  add_test(NAME onnx_fuzz
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_onnx_fuzz.sh ${RLX_FUZZ_SECONDS} ${CMAKE_BINARY_DIR}/fuzz-build)
  set_tests_properties(onnx_fuzz PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1500 RESOURCE_LOCK rlx_fuzz_build)
endif()
