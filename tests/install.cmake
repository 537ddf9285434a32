# The install rules: a user's program finds and links the installed librlx
# (CMake package and pkg-config).  Not in sanitizer builds: the consumer is
# an ordinary program and cannot load a sanitized library.
if(NOT RLX_SANITIZE)
  add_test(NAME install_find_package
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/check_install.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
endif()
