# ONNX importer tests: unit tests on generated models (test_onnx_import.c,
# registered by the glob in CMakeLists.txt) and the backend-test suite.
if(TARGET test_onnx_import)
  set_tests_properties(test_onnx_import PROPERTIES SKIP_RETURN_CODE 77)
endif()
if(RLX_HAVE_ONNX)
  add_test(NAME onnx_conformance
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/onnx/conformance.sh $<TARGET_FILE:rlx_cli> 950
            ${CMAKE_BINARY_DIR}/onnx_conformance.log)
  set_tests_properties(onnx_conformance PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1800)
endif()
