/* Warpgroup products for Hopper (sm_90): D(64 x WG_N) += A(64 x 16) B(16 x WG_N), bf16 inputs
 * from local tiles, f32 accumulators -- PTX wgmma.mma_async.m64nNk16 -- for the GEMM
 * (cl/gemm_mma.cl with GMM_WG).  A warpgroup is four consecutive warps; warp w of it holds rows
 * 16w.. of D in exactly mma.sync's C layout (mma.cl), one m-tile and WG_N / 8 n-blocks:
 * acc[0][j][0..1] = (16w + g, 8j + 2t..), acc[0][j][2..3] = (16w + g + 8, 8j + 2t..).
 *
 * Tiles are 16-bit, 32 k wide, in wgmma's 64-byte swizzle (docs/spec.md section 4b): a K-major
 * tile (A; B when TRANS_B) keeps row r's 32 k in one 64-byte line, its 16-byte chunk c at
 * c ^ ((r / 2) % 4); an MN-major B (b [K, N]) keeps atoms of 8 k-rows x 32 n, the same swizzle
 * within each, atoms along N 512 bytes apart and 8-row groups WG_N x 16 bytes apart.  A tile
 * must start on a 512-byte boundary (the hardware swizzles address bits).
 *
 * Bodies: MMA_PTX -- the instructions, each line marked WG_SM90A: NVIDIA's OpenCL compiles for
 * sm_90, whose ptxas refuses wgmma, so those lines reach the PTX as comments and the program
 * builder (src/runtime/program.c) loads that PTX retargeted to sm_90a with the marks removed;
 * otherwise the portable body: each lane sums its own accumulators from the tiles, reading them
 * through the same swizzle (CI runs it on PoCL, TDACL_MMA_EMULATE=wgmma). */

#ifndef WG_N
#ifdef GWG_BN
#define WG_N GWG_BN /* the GEMM's tile width */
#else
#define WG_N 128 /* columns of D: 64 or 128 */
#endif
#endif
#ifndef TRANS_B
#define TRANS_B 0
#endif
#if WG_N != 64 && WG_N != 128
#error "WG_N is 64 or 128"
#endif

/* element offsets in the tiles (16-bit elements) */
#define WG_K_OFF(r, k) ((r) * 32 + (((((k) >> 3) ^ ((r) >> 1)) & 3) << 3) + ((k) & 7))
#define WG_MN_OFF(k, n)                                                                                          \
    (((((k) >> 3) * (WG_N / 32) + ((n) >> 5)) << 8) + (((k) & 7) << 5) + ((((((n) >> 3) ^ (((k) & 7) >> 1)) & 3)) << 3) + \
     ((n) & 7))
#if TRANS_B
#define WG_B_OFF(k, n) WG_K_OFF(n, k)
#else
#define WG_B_OFF(k, n) WG_MN_OFF(k, n)
#endif

#if MMA_PTX
#define WG_SM90A "//@sm_90a@ "

/* a tile's descriptor: start, the byte offsets between core-matrix groups (along K or N, then
 * along M or K), the 64-byte swizzle */
inline ulong wg_desc(__local const mma_t *p, int lead, int stride)
{
    const uint a = mma_saddr(p);
    return (ulong)((a & 0x3FFFFu) >> 4) | ((ulong)((lead >> 4) & 0x3FFF) << 16) | ((ulong)((stride >> 4) & 0x3FFF) << 32) |
           (2ul << 62);
}

#define WG_C4(j) "+f"(acc[0][j][0]), "+f"(acc[0][j][1]), "+f"(acc[0][j][2]), "+f"(acc[0][j][3])
#define WG_C32 WG_C4(0), WG_C4(1), WG_C4(2), WG_C4(3), WG_C4(4), WG_C4(5), WG_C4(6), WG_C4(7)
#define WG_R32                                                                                                 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
    "%23, %24, %25, %26, %27, %28, %29, %30, %31"
#if WG_N == 64
#define WG_ACC WG_C32
#define WG_REGS "{" WG_R32 "}"
#define WG_OPS ", %32, %33, p, 1, 1, 0, "
#define WG_SD "%34"
#else
#define WG_ACC WG_C32, WG_C4(8), WG_C4(9), WG_C4(10), WG_C4(11), WG_C4(12), WG_C4(13), WG_C4(14), WG_C4(15)
#define WG_REGS                                                                                                   \
    "{" WG_R32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, " \
    "%51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WG_OPS ", %64, %65, p, 1, 1, 0, "
#define WG_SD "%66"
#endif
#define WG_STR_(x) #x
#define WG_STR(x) WG_STR_(x)
#define WG_SHAPE "m64n" WG_STR(WG_N) "k16"
#if TRANS_B
#define WG_TRANS_B "0" /* b [N, K]: K-major, as A */
#else
#define WG_TRANS_B "1" /* b [K, N]: MN-major, the instruction's transposed B */
#endif

/* k16 step kk of the 32-k tiles a (this warpgroup's 64 rows) and b */
inline void wg_mma_k16(float acc[1][WG_N / 8][4], __local const mma_t *a, __local const mma_t *b, int kk)
{
    const ulong da = wg_desc(a + 16 * kk, 16, 512);
#if TRANS_B
    const ulong db = wg_desc(b + 16 * kk, 16, 512);
#else
    const ulong db = wg_desc(b + 16 * WG_N * kk, 512, 16 * WG_N);
#endif
    __asm__ volatile(WG_SM90A "{ .reg .pred p; setp.ne.b32 p, " WG_SD ", 0; wgmma.mma_async.sync.aligned." WG_SHAPE
                              ".f32.bf16.bf16 " WG_REGS WG_OPS WG_TRANS_B "; }"
                     : WG_ACC
                     : "l"(da), "l"(db), "r"(1)
                     : "memory");
}
/* before a step's products: the tiles' copies (generic proxy) made visible to wgmma (async
 * proxy); the caller then meets the work-group barrier */
inline void wg_tiles_ready(void) { __asm__ volatile(WG_SM90A "fence.proxy.async.shared::cta;" ::: "memory"); }
/* around a step's products: the accumulators handed to the unit, then the products done */
inline void wg_begin(void) { __asm__ volatile(WG_SM90A "wgmma.fence.sync.aligned;" ::: "memory"); }
inline void wg_end(float acc[1][WG_N / 8][4])
{
    __asm__ volatile(WG_SM90A "wgmma.commit_group.sync.aligned;" ::: "memory");
    __asm__ volatile(WG_SM90A "wgmma.wait_group.sync.aligned 0;" ::: "memory");
    /* the accumulators' later reads stay after the wait */
    UNROLL_FRAG for (int j = 0; j < WG_N / 8; j++)
        UNROLL_FRAG for (int e = 0; e < 4; e++) __asm__ volatile("" : "+f"(acc[0][j][e])::"memory");
}

#else
/* ------------------------------------------------------------- portable OpenCL C body --- */

inline void wg_mma_k16(float acc[1][WG_N / 8][4], __local const mma_t *a, __local const mma_t *b, int kk)
{
    const int l = mma_lane(), w = mma_warp() & 3, g = l >> 2, t = l & 3;
    for (int j = 0; j < WG_N / 8; j++)
        for (int e = 0; e < 4; e++) {
            const int r = 16 * w + g + 8 * (e >> 1), n = 8 * j + 2 * t + (e & 1);
            float s = 0.0f;
            for (int k = 16 * kk; k < 16 * kk + 16; k++)
                s = fma(mma_to_f32(a[WG_K_OFF(r, k)]), mma_to_f32(b[WG_B_OFF(k, n)]), s);
            acc[0][j][e] += s;
        }
}
inline void wg_tiles_ready(void) {}
inline void wg_begin(void) {}
inline void wg_end(float acc[1][WG_N / 8][4]) { (void)acc; }
#endif
