/* Shared helpers of the `tdacl` command-line tool. */
#ifndef TDACL_CLI_H
#define TDACL_CLI_H

#include "cli/cli_parse.h"
#include "runtime/runtime.h"

/* Prints "tdacl: <status>: <message>" (and the build log for build failures); returns 1. */
int cli_report(const tdacl_context *ctx, tdacl_status st);
/* Opens a context on `device` (NULL = default) or reports the failure. */
tdacl_status cli_open(const char *device, tdacl_context **ctx);


int cmd_devices(int argc, char **argv);
int cmd_attention(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_prebuild(int argc, char **argv);
int cmd_programs(int argc, char **argv);
int cmd_make_model(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);

#endif
