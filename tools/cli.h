/* cli.h - the `rlx` program's subcommands, one function each. */
#ifndef RLX_CLI_H
#define RLX_CLI_H

int rlx_cmd_run(int argc, char **argv);
int rlx_cmd_dump(int argc, char **argv);
int rlx_cmd_generate(int argc, char **argv); /* tools/cmd_generate.c */
int rlx_cmd_quantize(int argc, char **argv); /* tools/cmd_quantize.c */
int rlx_cmd_train(int argc, char **argv);    /* tools/cmd_train.c */

/* Option values (tools/cli_args.c): 0, or 1 with a message on stderr
 * naming the command, the option and the text. */
int cli_parse_long(const char *cmd, const char *flag, const char *v, long lo, long hi, long *out);
int cli_parse_double(const char *cmd, const char *flag, const char *v, double lo, double hi, double *out);
#ifdef RLX_HAVE_ONNX
/* tools/cmd_onnx.c, in builds with the ONNX importer. */
int rlx_cmd_info(int argc, char **argv);
int rlx_cmd_onnx_test(int argc, char **argv);
#endif

#endif
