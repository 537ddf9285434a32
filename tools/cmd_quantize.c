/* cmd_quantize.c - `rlx quantize IN OUT --type TYPE`: a GGUF file of
 * quantized weights from a safetensors checkpoint or another GGUF file
 * (rlx_quantize_file does the work). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "rlx.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: rlx quantize IN OUT --type TYPE [--force] [--quiet]\n"
               "\n"
               "IN is a folder with config.json, safetensors and tokenizer.json (Llama, Mistral,\n"
               "Qwen2, Qwen3), or a .gguf file (F32/F16/BF16 or already quantized).\n"
               "OUT is the GGUF file written; an existing OUT is kept unless --force.\n"
               "\n"
               "types:\n"
               "  q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k q6_k   every weight matrix in that type\n"
               "  q4_k_m q5_k_m                            llama.cpp's mixes: Q6_K for the output and for\n"
               "                                           some attn_v / ffn_down layers\n"
               "Norms and biases stay F32; rows that do not fill the type's blocks fall back\n"
               "as llama.cpp's do (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, else F16).\n"
               "\n"
               "options:\n"
               "  --type TYPE   (required)\n"
               "  --force       replace an existing OUT\n"
               "  --quiet       no line per tensor\n");
}

int rlx_cmd_quantize(int argc, char **argv)
{
    const char *in = NULL, *out = NULL, *type = NULL;
    int flags = 0, quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--type") || !strcmp(a, "-t")) {
            if (++i >= argc) {
                fprintf(stderr, "rlx quantize: --type needs a value\n");
                return 2;
            }
            type = argv[i];
        } else if (!strncmp(a, "--type=", 7)) {
            type = a + 7;
        } else if (!strcmp(a, "--force")) {
            flags |= RLX_FILE_FORCE;
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "rlx quantize: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (!in) {
            in = a;
        } else if (!out) {
            out = a;
        } else {
            fprintf(stderr, "rlx quantize: one input and one output, got also '%s'\n", a);
            return 2;
        }
    }
    if (!in || !out || !type) {
        fprintf(stderr, "rlx quantize: %s\n", !in || !out ? "IN and OUT are required" : "--type is required");
        usage(stderr);
        return 2;
    }
    rlx_status st = rlx_quantize_file(in, out, type, flags, quiet ? NULL : stdout);
    if (st != RLX_OK) {
        fprintf(stderr, "rlx quantize: %s\n", rlx_last_error());
        return 1;
    }
    return 0;
}
