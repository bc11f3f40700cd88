/* tdacl tune: filled in by the tuning work (issue 5). */
#include <stdio.h>

#include "cli.h"

int cmd_tune(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "tdacl tune: not available in this build yet\n");
    return 2;
}
