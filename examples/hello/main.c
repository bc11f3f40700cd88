/* The smallest libtdacl program: open the default device, round-trip a [1,1,8,16] f32
 * tensor through it and print the device name.  Builds against an installed libtdacl
 * with CMake (find_package(tdacl)) or pkg-config (see Makefile.pkgconfig). */
#include <stdio.h>
#include <tdacl.h>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        tdacl_status st_ = (call);                                                           \
        if (st_ != TDACL_SUCCESS) {                                                          \
            fprintf(stderr, "%s failed: %s: %s\n", #call, tdacl_status_str(st_),             \
                    tdacl_last_error(ctx));                                                  \
            goto done;                                                                       \
        }                                                                                    \
    } while (0)

int main(void)
{
    int rc = 1;
    tdacl_context *ctx = NULL;
    tdacl_tensor *t = NULL;
    enum { N = 1 * 1 * 8 * 16 };
    float in[N], out[N];
    for (int i = 0; i < N; i++) in[i] = 0.5f * (float)i, out[i] = -1.0f;

    CHECK(tdacl_context_create(NULL, &ctx)); /* $TDACL_DEVICE or the default device */
    tdacl_device_info info;
    CHECK(tdacl_context_get_info(ctx, &info));
    printf("libtdacl %s on %s / %s\n", tdacl_version(), info.platform_name, info.name);

    const int64_t shape[4] = {1, 1, 8, 16};
    CHECK(tdacl_tensor_create(ctx, TDACL_F32, 4, shape, &t));
    CHECK(tdacl_tensor_upload(t, in, TDACL_F32, N));
    CHECK(tdacl_tensor_download(t, out, TDACL_F32, N));
    for (int i = 0; i < N; i++)
        if (out[i] != in[i]) {
            fprintf(stderr, "element %d came back as %g, sent %g\n", i, out[i], in[i]);
            goto done;
        }
    printf("round trip of %d floats: ok\n", N);
    rc = 0;
done:
    tdacl_tensor_destroy(t);
    tdacl_context_destroy(ctx);
    return rc;
}
