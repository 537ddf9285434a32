# The command-line program's options, reports and error messages.
add_test(NAME cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_cli.sh $<TARGET_FILE:rlx_cli>)
