/* cli.h - the `rlx` program's subcommands, one function each. */
#ifndef RLX_CLI_H
#define RLX_CLI_H

int rlx_cmd_run(int argc, char **argv);
int rlx_cmd_dump(int argc, char **argv);
/* From the ONNX module (tools/cmd_onnx.c) when it is built. */
int rlx_cmd_info(int argc, char **argv) __attribute__((weak));
int rlx_cmd_onnx_test(int argc, char **argv) __attribute__((weak));

#endif
