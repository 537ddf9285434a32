# No circles between files or folders of src/ (scripts/include_cycles.py:
# #include graph, folders, and which files' objects call each other): a
# helper that several files share lives in a file below them.
find_package(Python3 COMPONENTS Interpreter)
find_program(RLX_NM nm)
if(Python3_Interpreter_FOUND AND RLX_NM)
  add_test(NAME include_cycles COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/include_cycles.py ${CMAKE_BINARY_DIR})
endif()
