/* rlx.c - the command-line program: `rlx run`, `rlx dump`, and the model
 * file commands when the ONNX module is built. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rlx.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: rlx <command> [options]\n"
               "\n"
               "commands:\n"
               "  run [MODEL]     compile and run a model (default: the embedded encoder workload)\n"
               "  generate [MODEL] text from a decoder LLM (.gguf, safetensors folder; default: embedded)\n"
               "  quantize IN OUT --type T  write a quantized GGUF file (from safetensors or GGUF)\n"
               "  train           train the built-in decoder on a text (default: Debian's license texts)\n"
               "  dump --dot      write the graph before and after optimization as Graphviz\n"
               "  info MODEL      inputs, outputs, opsets and op counts of a model file\n"
               "  onnx-test DIR   run ONNX backend test cases\n"
               "\n"
               "`rlx <command> --help` describes each command's options.\n");
}

/* An interrupted command leaves no temporary file of a write in progress. */
static void on_signal(int sig)
{
    rlx_file_remove_pending();
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run"))
        return rlx_cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate"))
        return rlx_cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "train"))
        return rlx_cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "quantize"))
        return rlx_cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(cmd, "dump"))
        return rlx_cmd_dump(argc - 1, argv + 1);
    if (!strcmp(cmd, "info") || !strcmp(cmd, "onnx-test")) {
#ifdef RLX_HAVE_ONNX
        return !strcmp(cmd, "info") ? rlx_cmd_info(argc - 1, argv + 1) : rlx_cmd_onnx_test(argc - 1, argv + 1);
#else
        fprintf(stderr, "rlx %s: this build has no ONNX support\n", cmd);
        return 2;
#endif
    }
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("rlx %s\n", rlx_version());
        return 0;
    }
    fprintf(stderr, "rlx: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
