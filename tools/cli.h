/* cli.h - the `rlx` program's subcommands, one function each. */
#ifndef RLX_CLI_H
#define RLX_CLI_H

int rlx_cmd_run(int argc, char **argv);
int rlx_cmd_dump(int argc, char **argv);
int rlx_cmd_generate(int argc, char **argv); /* tools/cmd_generate.c */
int rlx_cmd_quantize(int argc, char **argv); /* tools/cmd_quantize.c */
int rlx_cmd_train(int argc, char **argv);    /* tools/cmd_train.c */
#ifdef RLX_HAVE_ONNX
/* tools/cmd_onnx.c, in builds with the ONNX importer. */
int rlx_cmd_info(int argc, char **argv);
int rlx_cmd_onnx_test(int argc, char **argv);
#endif

#endif
