/* A growable string for build options, keys and messages. */
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"

void tdacl__sb_printf(tdacl_strbuf *sb, const char *fmt, ...)
{
    if (sb->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = sb->cap - sb->len;
        int n = vsnprintf(sb->data ? sb->data + sb->len : NULL, sb->data ? room : 0, fmt, ap);
        va_end(ap);
        if (n < 0) { sb->oom = 1; return; }
        if (sb->data && (size_t)n < room) { sb->len += (size_t)n; return; }
        size_t cap = sb->cap ? sb->cap * 2 : 256;
        while (cap < sb->len + (size_t)n + 1) cap *= 2;
        char *p = realloc(sb->data, cap);
        if (!p) { sb->oom = 1; return; }
        sb->data = p;
        sb->cap = cap;
        if (sb->len == 0) sb->data[0] = '\0';
    }
}

void tdacl__sb_free(tdacl_strbuf *sb)
{
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    sb->oom = 0;
}
