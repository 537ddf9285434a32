# Checkpoint readers (test_gguf.c, test_safetensors.c, registered by the glob
# in CMakeLists.txt): the same executables again over the files
# tests/llm/formats.py writes, and the readers' libFuzzer targets for a
# bounded time.
if(TARGET test_safetensors AND RLX_HAVE_CJSON)
  target_include_directories(test_safetensors PRIVATE ${RLX_CJSON_INCLUDE_DIR})
  target_link_libraries(test_safetensors PRIVATE ${RLX_CJSON_LIBRARY})
endif()
set(_rlx_fx ${CMAKE_BINARY_DIR}/formats_fixtures)
add_test(NAME formats_py_fixtures
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/llm/formats.py fixtures ${_rlx_fx})
set_tests_properties(formats_py_fixtures PROPERTIES FIXTURES_SETUP formats_py)
foreach(t test_gguf test_safetensors)
  if(TARGET ${t})
    add_test(NAME ${t}_formats_py COMMAND ${t} ${_rlx_fx})
    set_tests_properties(${t}_formats_py PROPERTIES FIXTURES_REQUIRED formats_py SKIP_RETURN_CODE 77)
  endif()
endforeach()
# One clang build for every fuzz target (tests/onnx.cmake's too): the runs
# take turns on it.
if(NOT RLX_SANITIZE)
  foreach(fmt gguf safetensors)
    add_test(NAME ${fmt}_fuzz
      COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/run_formats_fuzz.sh ${fmt} ${RLX_FUZZ_SECONDS} ${CMAKE_BINARY_DIR}/fuzz-build)
    set_tests_properties(${fmt}_fuzz PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1500 RESOURCE_LOCK rlx_fuzz_build)
  endforeach()
endif()
