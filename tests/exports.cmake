# exports.cmake - librlx exports exactly rlx.h's RLX_API functions
# (tests/check_exports.sh compares the header with `nm -D`).
add_test(NAME api_exports
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.sh $<TARGET_FILE:rlx> ${CMAKE_SOURCE_DIR}/include/rlx.h)
set_tests_properties(api_exports PROPERTIES SKIP_RETURN_CODE 77 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
