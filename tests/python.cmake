# The Python package (python/): built against this build's librlx and
# tested with pytest, its examples run, and an offline pip install into a
# venv.  Release-type builds only (the extension would need the sanitizer
# runtime preloaded into the interpreter).  Debian's python3 is preferred:
# it is the one with python3-numpy.
if(NOT RLX_SANITIZE)
  find_program(RLX_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT RLX_PYTHON)
    find_program(RLX_PYTHON NAMES python3)
  endif()
  if(RLX_PYTHON)
    execute_process(COMMAND ${RLX_PYTHON} -c "import numpy, setuptools, pytest"
                    RESULT_VARIABLE rlx_py_ok OUTPUT_QUIET ERROR_QUIET)
    set(rlx_py_env "RLX_PYTHON=${RLX_PYTHON};RLX_CLI=$<TARGET_FILE:rlx_cli>;RLX_LIB_DIR=$<TARGET_FILE_DIR:rlx>")
    if(rlx_py_ok EQUAL 0)
      add_test(NAME python_pytest
        COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/python/run_pytest.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/python)
      set_tests_properties(python_pytest PROPERTIES ENVIRONMENT "${rlx_py_env}" TIMEOUT 900 SKIP_RETURN_CODE 77)
      add_test(NAME python_venv_install
        COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/python/venv_install.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/python-venv)
      set_tests_properties(python_venv_install PROPERTIES ENVIRONMENT "${rlx_py_env}" TIMEOUT 600 SKIP_RETURN_CODE 77)
    else()
      message(STATUS "Python tests off: ${RLX_PYTHON} lacks numpy, setuptools or pytest (scripts/install-deps.sh)")
    endif()
  endif()
endif()
