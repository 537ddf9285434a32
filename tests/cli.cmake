# The command-line program's options, reports and error messages.
add_test(NAME cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_cli.sh $<TARGET_FILE:rlx_cli>)
# `rlx train`: loss falls, checkpoints resume bit-identically, files only on request.
add_test(NAME cli_train COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train/check_train_cli.sh $<TARGET_FILE:rlx_cli>)
