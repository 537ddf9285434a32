# RLX beside ONNX Runtime: conformance counts and the trained npm models.
# Release configuration only (the sanitizer build runs the suite itself).
if(RLX_HAVE_ONNX AND NOT RLX_SANITIZE)
  add_test(NAME onnx_peers
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/onnx/peers_ci.sh $<TARGET_FILE:rlx_cli> ${CMAKE_BINARY_DIR}/onnx-peers)
  set_tests_properties(onnx_peers PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1500)
endif()
