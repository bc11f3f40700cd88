/* Leak check for OpenCL objects: every buffer, queue and program (and through its
 * program, every kernel) holds a reference to its cl_context, so after
 * tdacl_context_destroy only a reference taken here may remain.  This catches a missing
 * clRelease* in libtdacl, which the sanitizer's leak check cannot see through the
 * driver (tools/lsan.supp suppresses the driver's own leaks). */
#ifndef TDACL_CLCHECK_H
#define TDACL_CLCHECK_H

#include <time.h>

#include "common/testutil.h"
#include "runtime/runtime.h"

/* The driver may drop the references of just-finished commands from its own threads a
 * little after clFinish returns (PoCL does), so the count is polled for up to 5 s: a
 * real leak never goes away. */
static inline void tu_destroy_checked_at(tdacl_context *ctx, const char *file, int line)
{
    cl_context cl = ctx->cl;
    assert_int_equal(clRetainContext(cl), CL_SUCCESS);
    assert_ok(NULL, tdacl_context_destroy(ctx));
    cl_uint refs = 0;
    cl_int err = CL_SUCCESS;
    for (int waited_ms = 0; waited_ms <= 5000; waited_ms++) {
        err = clGetContextInfo(cl, CL_CONTEXT_REFERENCE_COUNT, sizeof refs, &refs, NULL);
        if (err != CL_SUCCESS || refs == 1) break;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    clReleaseContext(cl);
    assert_int_equal(err, CL_SUCCESS);
    if (refs != 1)
        fail_msg("%s:%d: %u OpenCL object(s) still hold the cl_context after tdacl_context_destroy", file,
                 line, refs - 1);
}
#define tu_destroy_checked(ctx) tu_destroy_checked_at(ctx, __FILE__, __LINE__)

#endif
