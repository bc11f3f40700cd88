/* libFuzzer entry for the command line's number and token-list parsers.  Accepted numbers
 * are finite; an accepted id list holds only ids 0..INT32_MAX and came from a string of
 * digits and single commas. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_parse.h"

static void check(int ok)
{
    if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0; /* the parsers see what argv would hold: up to the first NUL */
    double x;
    if (!cli_double(s, &x)) check(isfinite(x));
    long long v;
    if (!cli_long(s, &v)) check(s[0] == '-' || (s[0] >= '0' && s[0] <= '9'));
    int32_t *ids = NULL;
    int n = 0;
    if (!cli_parse_ids(s, &ids, &n)) {
        check(n >= 1 && ids != NULL);
        for (int i = 0; i < n; i++) check(ids[i] >= 0);
        size_t len = strlen(s);
        check(len > 0 && s[0] != ',' && s[len - 1] != ',' && !strstr(s, ",,"));
        for (size_t i = 0; i < len; i++) check((s[i] >= '0' && s[i] <= '9') || s[i] == ',');
        free(ids);
    } else {
        check(ids == NULL);
    }
    free(s);
    return 0;
}
