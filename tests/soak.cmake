# Resident memory over many runs and compiles (bench/soak.c): a short soak
# here (the full counts: bench/soak.sh).  Not under the sanitizers, whose
# allocator keeps freed memory in quarantine (their leak check covers the
# same ground there).
add_executable(rlx_soak ${CMAKE_SOURCE_DIR}/bench/soak.c)
target_include_directories(rlx_soak PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(rlx_soak PRIVATE rlx_internal)
if(NOT RLX_SANITIZE)
  add_test(NAME soak_short COMMAND rlx_soak 5000 20 ${CMAKE_SOURCE_DIR}/tests/cli/data/tiny.onnx)
  set_tests_properties(soak_short PROPERTIES TIMEOUT 600)
endif()
