/* Strict parsers of the `tdacl` command line; no library state, so fuzz targets link them. */
#ifndef TDACL_CLI_PARSE_H
#define TDACL_CLI_PARSE_H

#include <stdint.h>

/* A whole string as a number: returns 0 on success, -1 on anything else (empty, blanks,
 * a sign '+', trailing characters, out of range). */
int cli_double(const char *s, double *out);
int cli_long(const char *s, long long *out);
/* "15,42,7" -> ids (malloc'ed): digits and single commas only, each id <= INT32_MAX. */
int cli_parse_ids(const char *s, int32_t **out, int *n);

/* 1 when opt is one of the space-separated names in `names` ("--q --k --out"). */
int cli_known(const char *opt, const char *names);

/* "--opt=value" becomes "--opt" "value" (argv[0] kept), so every command parses one spelling.
 * The option names are copied into one block (*names); the caller frees the returned vector
 * and *names.  NULL when out of memory. */
char **cli_split_assignments(int argc, char **argv, int *out_argc, char **names);
/* run(argc', argv') on the split arguments and free them: a program's main (prog names it in
 * the out-of-memory message). */
int cli_run_split(int argc, char **argv, const char *prog, int (*run)(int, char **));

#endif
