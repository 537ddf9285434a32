# test_alloc_failures also takes the attention model that test_onnx_import
# generates, so it runs after it.
if(TARGET test_alloc_failures AND TARGET test_onnx_import)
  set_tests_properties(test_alloc_failures PROPERTIES DEPENDS test_onnx_import)
endif()
