/* The log: $TDACL_LOG picks the level; a context or process-wide callback receives it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"

static tdacl_log_fn global_fn;
static void *global_user;
static int global_level = -1; /* -1: from the environment */

static const char *level_name(tdacl_log_level l)
{
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    return (l >= TDACL_LOG_DEBUG && l <= TDACL_LOG_OFF) ? names[l] : "?";
}

int tdacl__log_level_from_env(void)
{
    const char *s = getenv("TDACL_LOG");
    if (!s || !*s) return TDACL_LOG_WARN;
    for (int l = TDACL_LOG_DEBUG; l <= TDACL_LOG_OFF; l++)
        if (!strcasecmp(s, level_name((tdacl_log_level)l))) return l;
    if (!strcasecmp(s, "warning")) return TDACL_LOG_WARN;
    if (!strcasecmp(s, "none")) return TDACL_LOG_OFF;
    return TDACL_LOG_WARN;
}

tdacl_status tdacl_log_set_callback(tdacl_log_fn fn, void *user, int level)
{
    if (level > TDACL_LOG_OFF)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT,
                           "tdacl_log_set_callback: level %d is not a tdacl_log_level", level);
    global_fn = fn;
    global_user = user;
    global_level = level;
    return TDACL_SUCCESS;
}

int tdacl__log_has_callback(void) { return global_fn != NULL; }

static int effective_level(const tdacl_context *ctx)
{
    if (ctx && tdacl__diag(ctx)->log_level >= 0) return tdacl__diag(ctx)->log_level;
    if (global_level >= 0) return global_level;
    return tdacl__log_level_from_env();
}

int tdacl__log_enabled(const tdacl_context *ctx, tdacl_log_level level)
{
    return (int)level >= effective_level(ctx) && level < TDACL_LOG_OFF;
}

void tdacl__log(const tdacl_context *ctx, tdacl_log_level level, const char *fmt, ...)
{
    if (!tdacl__log_enabled(ctx, level)) return;
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tdacl_log_fn fn = (ctx && tdacl__diag(ctx)->log_fn) ? tdacl__diag(ctx)->log_fn : global_fn;
    void *user = (ctx && tdacl__diag(ctx)->log_fn) ? tdacl__diag(ctx)->log_user : global_user;
    if (fn)
        fn(level, msg, user);
    else
        fprintf(stderr, "tdacl %s: %s\n", level_name(level), msg);
}
