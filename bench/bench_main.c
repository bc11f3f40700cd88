/* tdacl-bench: placeholder until the benchmark lands (issue 4). */
#include <stdio.h>

#include "tdacl.h"

int main(void)
{
    printf("tdacl-bench %s: not built yet\n", tdacl_version());
    return 0;
}
