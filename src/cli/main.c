/* tdacl: the command-line tool.  One file per command. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tdacl COMMAND [options]\n"
            "  devices [--verbose] [--peak] [--device SEL]   list OpenCL devices and capabilities\n"
            "  attention --kind K --q q.npy --k k.npy --v v.npy --out o.npy [...]\n"
            "                                                 run one attention call on .npy inputs\n"
            "  tune [--kernel NAME|all] [--device SEL] [...]  search block sizes for this device\n"
            "  forward --model DIR --tokens ids --out logits.npy   logits of every position\n"
            "  generate --model DIR (--prompt TEXT|--tokens ids) [--max-new N] [--temperature T]\n"
            "           [--top-k K] [--seed S]                 sample a continuation\n"
            "  tokenize --model DIR (--text TEXT|--ids ids)  text to token ids and back (GPT-2 BPE)\n"
            "  calibrate --model DIR (--tokens FILE|--text FILE) --k K --out FILE [...]\n"
            "                                                 Top-theta thresholds of a softmax model\n"
            "  make-model --config FILE --out DIR [--seed S] [--dtype f32|bf16|f16] [--force]\n"
            "                                                 checkpoint with seeded random weights\n"
            "  version (or --version)                        library version and git revision\n"
            "  help [COMMAND]                                this text, or a command's options\n"
            "Run `tdacl COMMAND --help` for a command's options; `--opt=value` and `--opt value`\n"
            "are the same.  TDACL_DEVICE, TDACL_LOG, TDACL_CACHE and TDACL_CACHE_DIR are read from\n"
            "the environment.\n");
}

int cli_report(const tdacl_context *ctx, tdacl_status st)
{
    fprintf(stderr, "tdacl: %s: %s\n", tdacl_status_str(st), tdacl_last_error(ctx));
    if (st == TDACL_ERR_BUILD && ctx && tdacl_build_log(ctx)[0])
        fprintf(stderr, "---- build log ----\n%s\n-------------------\n", tdacl_build_log(ctx));
    return 1;
}

tdacl_status cli_open(const char *device, tdacl_context **ctx)
{
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.device = device;
    tdacl_status st = tdacl_context_create(&desc, ctx);
    if (st) cli_report(NULL, st);
    return st;
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help")) {
        if (argc < 3) {
            usage(stdout);
            return 0;
        }
        char *sub[3] = {argv[0], argv[2], "--help"};
        return dispatch(3, sub);
    }
    if (!strcmp(cmd, "devices")) return cmd_devices(argc - 1, argv + 1);
    if (!strcmp(cmd, "attention")) return cmd_attention(argc - 1, argv + 1);
    if (!strcmp(cmd, "tune")) return cmd_tune(argc - 1, argv + 1);
    if (!strcmp(cmd, "__prebuild")) return cmd_prebuild(argc - 1, argv + 1);
    if (!strcmp(cmd, "__programs")) return cmd_programs(argc - 1, argv + 1);
    if (!strcmp(cmd, "make-model")) return cmd_make_model(argc - 1, argv + 1);
    if (!strcmp(cmd, "forward")) return cmd_forward(argc - 1, argv + 1);
    if (!strcmp(cmd, "generate")) return cmd_generate(argc - 1, argv + 1);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(argc - 1, argv + 1);
    if (!strcmp(cmd, "calibrate")) return cmd_calibrate(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("libtdacl %s (git %s)\n", tdacl_version(), tdacl_git_revision());
        return 0;
    }
    fprintf(stderr, "tdacl: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv)
{
    /* internal prebuild arguments are option strings that hold '=' (-DBM=64): left as they are */
    if (argc > 1 && !strcmp(argv[1], "__prebuild")) return dispatch(argc, argv);
    return cli_run_split(argc, argv, "tdacl", dispatch);
}
