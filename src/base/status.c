/* Status strings and the last-error record (per context and per thread). */
#include <stdio.h>
#include <string.h>

#include "base/base.h"

static _Thread_local char thread_error[2048];

const char *tdacl_status_str(tdacl_status status)
{
    switch (status) {
    case TDACL_SUCCESS: return "success";
    case TDACL_ERR_INVALID_ARGUMENT: return "invalid argument";
    case TDACL_ERR_NO_DEVICE: return "no matching OpenCL device";
    case TDACL_ERR_OPENCL: return "OpenCL error";
    case TDACL_ERR_BUILD: return "kernel build failed";
    case TDACL_ERR_OUT_OF_MEMORY: return "out of memory";
    case TDACL_ERR_TOO_LARGE: return "buffer larger than the device allows";
    case TDACL_ERR_SHAPE: return "shape or stride mismatch";
    case TDACL_ERR_DTYPE: return "unsupported or mismatched dtype";
    case TDACL_ERR_UNSUPPORTED: return "not supported on this device";
    case TDACL_ERR_IO: return "file input/output error";
    case TDACL_ERR_FORMAT: return "malformed input";
    case TDACL_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *tdacl_last_error(const tdacl_context *ctx)
{
    return ctx ? tdacl__diag(ctx)->last_error : thread_error;
}

void tdacl__clear_error(const tdacl_context *ctx)
{
    thread_error[0] = '\0';
    if (ctx) tdacl__diag(ctx)->last_error[0] = '\0';
}

static tdacl_status record(const tdacl_context *ctx, tdacl_status st, const char *msg)
{
    snprintf(thread_error, sizeof thread_error, "%s", msg);
    if (ctx) snprintf(tdacl__diag(ctx)->last_error, sizeof tdacl__diag(ctx)->last_error, "%s", msg);
    tdacl__log(ctx, TDACL_LOG_DEBUG, "error (%s): %s", tdacl_status_str(st), msg);
    return st;
}

#undef tdacl__fail /* (the analyzer's wrappers, base.h) */
#undef tdacl__fail_cl

tdacl_status tdacl__fail(const tdacl_context *ctx, tdacl_status st, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return record(ctx, st, msg);
}

tdacl_status tdacl__cl_status(cl_int err)
{
    switch (err) {
    case CL_SUCCESS: return TDACL_SUCCESS;
    case CL_OUT_OF_HOST_MEMORY:
    case CL_OUT_OF_RESOURCES:
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return TDACL_ERR_OUT_OF_MEMORY;
    case CL_INVALID_BUFFER_SIZE: return TDACL_ERR_TOO_LARGE;
    case CL_BUILD_PROGRAM_FAILURE:
    case CL_COMPILER_NOT_AVAILABLE:
    case CL_INVALID_BUILD_OPTIONS: return TDACL_ERR_BUILD;
    case CL_DEVICE_NOT_FOUND:
    case -1001 /* CL_PLATFORM_NOT_FOUND_KHR */: return TDACL_ERR_NO_DEVICE;
    default: return TDACL_ERR_OPENCL;
    }
}

tdacl_status tdacl__fail_cl(const tdacl_context *ctx, cl_int err, const char *fmt, ...)
{
    char what[1024], msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "%s failed: %s (%d)", what, tdacl__cl_error_name(err), (int)err);
    return record(ctx, tdacl__cl_status(err), msg);
}
