# 8-bit ONNX models against onnxruntime-node (tests/onnx/int8_peers.sh).
if(RLX_HAVE_ONNX AND NOT RLX_SANITIZE)
  add_test(NAME onnx_int8_peers
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/onnx/int8_peers.sh $<TARGET_FILE:rlx_cli> ${CMAKE_BINARY_DIR}/onnx-int8-peers)
  set_tests_properties(onnx_int8_peers PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
