/* Tuning database and parameter lookup (src/runtime/tuning.c, src/ops/spaces.c): parsing good,
 * corrupted and partial text (bad lines are skipped with a warning naming the line),
 * formatting round trips, the lookup order user -> shipped -> class -> generic, fallbacks
 * for invalid entries, the constraint predicates and atomic file updates. */
#include "common/testutil.h"
#include "base/kinds.h"
#include "ops/variants.h"
#include "runtime/tuning.h"

static char *dir;
static tdacl_device_info dev; /* the real device (the lookup keys on its class) */

static int setup(void **state)
{
    (void)state;
    dir = tu_mkdtemp("tuning");
    unsetenv("TDACL_TUNING_FILE");
    int idx;
    if (tdacl_device_select(NULL, &idx) || tdacl_device_get_info(idx, &dev)) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tdacl_log_set_callback(NULL, NULL, -1);
    tu_rm_rf(dir);
    free(dir);
    return 0;
}

static void write_text(const char *path, const char *text) { tu_write_file(path, text, strlen(text)); }

/* A context whose user database is `file` (NULL: $TDACL_TUNING_FILE), logging warnings
 * to `log` when given. */
static tdacl_context *make_ctx(const char *file, int use_db, tu_log *log)
{
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.cache = 0;
    desc.tuning_file = file;
    desc.use_tuning_db = use_db;
    if (log) {
        desc.log_fn = tu_log_fn;
        desc.log_user = log;
        desc.log_level = TDACL_LOG_WARN;
    }
    tdacl_context *ctx = NULL;
    assert_ok(NULL, tdacl_context_create(&desc, &ctx));
    return ctx;
}

static const tdacl_problem PROBLEM = {TDACL_ATTN_TRA, TDACL_F32, 64, 64, 128, 1, 0, 0, 0, 0, 0, 0, 0};

static const tdacl_kernel_space *space(const char *kernel)
{
    const tdacl_variant_def *row = tdacl__variant_of_space(kernel);
    if (!row) fail_msg("no variant has the tuning space %s", kernel);
    return row->space;
}

/* The whole constraint (predicate and local memory) on a value array. */
static int chk(const tdacl_kernel_space *ks, const tdacl_device_info *d, const tdacl_problem *p, const int *v, char *why,
               size_t n)
{
    tdacl_param_values pv;
    memcpy(pv.v, v, sizeof pv.v);
    return tdacl__params_check(ks, d, p, &pv, why, n);
}

static tdacl_tuned lookup(tdacl_context *ctx, const char *kernel, const tdacl_problem *p)
{
    tdacl_tuned t;
    memset(&t, 0xee, sizeof t);
    assert_ok(ctx, tdacl__tuned(ctx, space(kernel), p, &t));
    return t;
}

static void assert_entry_equal(const tdacl_tdb_entry *a, const tdacl_tdb_entry *b)
{
    assert_string_equal(a->kernel, b->kernel);
    assert_string_equal(a->device, b->device);
    assert_string_equal(a->vendor, b->vendor);
    assert_string_equal(a->driver, b->driver);
    assert_string_equal(a->arch, b->arch);
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->d, b->d);
    assert_int_equal(a->dv, b->dv);
    assert_string_equal(a->tbucket, b->tbucket);
    assert_string_equal(a->bhbucket, b->bhbucket);
    assert_int_equal(a->lazy, b->lazy);
    assert_int_equal(a->tq, b->tq);
    assert_int_equal(a->nparams, b->nparams);
    for (int i = 0; i < a->nparams; i++) {
        assert_string_equal(a->pname[i], b->pname[i]);
        assert_int_equal(a->pvalue[i], b->pvalue[i]);
    }
    assert_string_equal(a->comment, b->comment);
}

/* ---- parsing ---- */

static const char *GOOD =
    "# tdacl tuning database\n"
    "attention class=pocl-cpu-x kind=tra dtype=f32 d=64 dv=64 t=short : BM=16 BN=16 TM=2 TN=4   # measured 1.2 ms\n"
    "\n"
    "attention device=\"My Device 9000\" vendor=\"ACME Inc\" driver=\"1.2.3\" : BM=64 BN=32 TM=8 TN=4\n"
    "   attention_decode   class=nvidia-sm_90 tq=4 t=long dtype=bf16 :NTD=128 WAVES=8";

static void check_good(const tdacl_tdb *db)
{
    assert_int_equal(db->count, 3);
    const tdacl_tdb_entry *e = &db->entries[0];
    assert_string_equal(e->kernel, "attention");
    assert_string_equal(e->arch, "pocl-cpu-x");
    assert_int_equal(e->kind, TDACL_ATTN_TRA);
    assert_int_equal(e->dtype, TDACL_F32);
    assert_true(e->d == 64 && e->dv == 64 && e->tq == 0);
    assert_string_equal(e->tbucket, "short");
    assert_int_equal(e->nparams, 4);
    assert_string_equal(e->pname[0], "BM");
    assert_string_equal(e->pname[3], "TN");
    assert_true(e->pvalue[0] == 16 && e->pvalue[1] == 16 && e->pvalue[2] == 2 && e->pvalue[3] == 4);
    assert_string_equal(e->comment, "measured 1.2 ms");
    assert_int_equal(e->line, 2);
    e = &db->entries[1];
    assert_string_equal(e->device, "My Device 9000");
    assert_string_equal(e->vendor, "ACME Inc");
    assert_string_equal(e->driver, "1.2.3");
    assert_string_equal(e->arch, "");
    assert_true(e->kind == -1 && e->dtype == -1 && e->d == 0 && e->tbucket[0] == 0);
    assert_int_equal(e->line, 4);
    assert_string_equal(e->comment, "");
    e = &db->entries[2];
    assert_string_equal(e->kernel, "attention_decode");
    assert_string_equal(e->arch, "nvidia-sm_90");
    assert_true(e->tq == 4 && e->dtype == TDACL_BF16);
    assert_string_equal(e->tbucket, "long");
    assert_true(e->nparams == 2 && e->pvalue[0] == 128 && e->pvalue[1] == 8);
    assert_int_equal(e->line, 5);
}

static void test_parse_good(void **state)
{
    (void)state;
    tu_log log = {0};
    assert_ok(NULL, tdacl_log_set_callback(tu_log_fn, &log, TDACL_LOG_WARN));
    tdacl_tdb db;
    assert_ok(NULL, tdacl__tdb_parse(NULL, GOOD, strlen(GOOD), "good.tdb", &db));
    assert_string_equal(db.path, "good.tdb");
    check_good(&db);
    tdacl__tdb_free(&db);
    assert_null(db.entries);
    /* CRLF line ends parse the same */
    char crlf[2048];
    size_t n = 0;
    for (const char *p = GOOD; *p; p++) {
        if (*p == '\n') crlf[n++] = '\r';
        crlf[n++] = *p;
    }
    assert_ok(NULL, tdacl__tdb_parse(NULL, crlf, n, "crlf.tdb", &db));
    check_good(&db);
    tdacl__tdb_free(&db);
    /* only the given length is read: a prefix ending inside line 4 keeps lines 1-2, and
     * the cut line 4 has no parameters left */
    const char *cut = strstr(GOOD, "BM=64");
    assert_ok(NULL, tdacl__tdb_parse(NULL, GOOD, (size_t)(cut - GOOD), "cut.tdb", &db));
    assert_int_equal(db.count, 1);
    tdacl__tdb_free(&db);
    assert_true(tu_log_find(&log, TDACL_LOG_WARN, "cut.tdb:4:", "no ': PARAM=value' part", NULL) >= 0);
    assert_int_equal(log.count, 1);
    /* empty text */
    assert_ok(NULL, tdacl__tdb_parse(NULL, "", 0, "empty.tdb", &db));
    assert_int_equal(db.count, 0);
    tdacl__tdb_free(&db);
    tdacl_log_set_callback(NULL, NULL, -1);
    tu_log_clear(&log);
}

static void test_parse_bad_lines(void **state)
{
    (void)state;
    static const struct { const char *line, *why; } bad[] = {
        {"attention class=a : BM=16 BN=16 TM=2 TN=4", NULL}, /* good */
        {"attention class=a colour=red : BM=16", "unknown key 'colour'"},
        {"attention class=a kind=flash : BM=16", "unknown kind 'flash'"},
        {"attention class=a dtype=f64 : BM=16", "unknown dtype 'f64'"},
        {"gemm_mma class=a adtype=tf32 : GMM_BM=16", "unknown adtype 'tf32'"},
        {"attention class=a d=0 : BM=16", "d=0 is not a positive integer"},
        {"attention class=a dv=abc : BM=16", "dv=abc is not a positive integer"},
        {"attention class=a tq=5000 : BM=16", "tq=5000 is not a positive integer"},
        {"attention class=a t=medium : BM=16", "t=medium is not short or long"},
        {"attention_decode class=a bh=some : NTD=64", "bh=some is not few or many"},
        {"attention_mma class=a weights=sparse : BN=16", "weights=sparse is not lazy or eager"},
        {"attention class=a", "no ': PARAM=value' part"},
        {"attention class=a :", "no ': PARAM=value' part"},
        {"attention class=a : BM=16 : BN=8", "second ':'"},
        {"attention class=a : BM=sixteen", "parameter BM has a non-integer value 'sixteen'"},
        {"attention class=a : BM=99999999", "parameter BM=99999999 is outside -1000000..1000000"},
        {"attention class=a : BM=1048576", "parameter BM=1048576 is outside"},
        {"attention class=a : BM=99999999999999999999", "is outside"},
        {"attention class=a : BM=", "parameter BM has a non-integer value ''"},
        {"attention class=a : BM", "non-integer value ''"},
        {"attention class=a : A=1 B=2 C=3 D=4 E=5 F=6 G=7 H=8 I=9 J=1 K=1 L=1 M=1 N=1 O=1 P=1 Q=1 R=1 S=1 T=1 U=1", "too many parameters"}, /* > TDACL_MAX_PARAMS */
        {"attention device=\"unterminated : BM=16", "unterminated quote"},
        {": BM=16", "expected a kernel name first"},
        {"kernel=attention : BM=16", "expected a kernel name first"},
        {"attention class=a : AVERYLONGPARAMNAME=3", "bad parameter name 'AVERYLONGPARAMNAME'"},
        {"attention_decode class=b : NTD=64 WAVES=4", NULL}, /* good */
        {"   # indented comment", NULL},
        {"attention class=a : BM=16 BN=16 BM=32", "parameter BM is given twice"},
    };
    enum { NB = sizeof bad / sizeof *bad };
    char text[4096] = "";
    size_t off = 0;
    for (int i = 0; i < NB; i++) off += (size_t)snprintf(text + off, sizeof text - off, "%s\n", bad[i].line);
    /* a line with a NUL byte in it, last */
    const char nul_line[] = "attention\0class=a : BM=1\n";
    memcpy(text + off, nul_line, sizeof nul_line - 1);
    off += sizeof nul_line - 1;

    tu_log log = {0};
    assert_ok(NULL, tdacl_log_set_callback(tu_log_fn, &log, TDACL_LOG_WARN));
    tdacl_tdb db;
    assert_ok(NULL, tdacl__tdb_parse(NULL, text, off, "bad.tdb", &db));
    assert_int_equal(db.count, 2);
    assert_int_equal(db.entries[0].line, 1);
    assert_string_equal(db.entries[1].kernel, "attention_decode");
    assert_int_equal(db.entries[1].line, 26);
    int nwarn = 0;
    for (int i = 0; i < NB; i++) {
        if (!bad[i].why) continue;
        nwarn++;
        char where[32];
        snprintf(where, sizeof where, "bad.tdb:%d:", i + 1);
        if (tu_log_find(&log, TDACL_LOG_WARN, where, bad[i].why, "line ignored", NULL) < 0) {
            tu_log_dump(&log);
            fail_msg("no warning \"%s ... %s\" for line: %s", where, bad[i].why, bad[i].line);
        }
    }
    char where[32];
    snprintf(where, sizeof where, "bad.tdb:%d:", NB + 1);
    assert_true(tu_log_find(&log, TDACL_LOG_WARN, where, "NUL byte", NULL) >= 0);
    assert_int_equal(log.count, nwarn + 1);
    tdacl__tdb_free(&db);
    tdacl_log_set_callback(NULL, NULL, -1);
    tu_log_clear(&log);
}

static void test_format_roundtrip(void **state)
{
    (void)state;
    tdacl_tdb_entry e;
    tdacl__tdb_entry_init(&e);
    snprintf(e.kernel, sizeof e.kernel, "attention");
    snprintf(e.arch, sizeof e.arch, "pocl-cpu-x");
    e.kind = TDACL_ATTN_TDA;
    e.dtype = TDACL_BF16;
    e.d = 64, e.dv = 32;
    snprintf(e.tbucket, sizeof e.tbucket, "long");
    e.nparams = 4;
    const char *names[4] = {"BM", "BN", "TM", "TN"};
    const int vals[4] = {32, 16, 4, 4};
    for (int i = 0; i < 4; i++) snprintf(e.pname[i], sizeof e.pname[i], "%s", names[i]), e.pvalue[i] = vals[i];
    snprintf(e.comment, sizeof e.comment, "tuned");
    char line[1024];
    tdacl__tdb_format(&e, line, sizeof line);
    assert_string_equal(line, "attention class=pocl-cpu-x kind=tda dtype=bf16 d=64 dv=32 t=long : BM=32 BN=16 TM=4 TN=4  # tuned");

    /* every entry of GOOD survives format -> parse unchanged */
    tdacl_tdb db, again;
    assert_ok(NULL, tdacl__tdb_parse(NULL, GOOD, strlen(GOOD), "good.tdb", &db));
    for (int i = 0; i < db.count; i++) {
        tdacl__tdb_format(&db.entries[i], line, sizeof line);
        assert_ok(NULL, tdacl__tdb_parse(NULL, line, strlen(line), "again", &again));
        assert_int_equal(again.count, 1);
        assert_entry_equal(&again.entries[0], &db.entries[i]);
        tdacl__tdb_free(&again);
    }
    tdacl__tdb_free(&db);
    /* a small buffer truncates without overrunning */
    char small[16];
    memset(small, 'x', sizeof small);
    tdacl__tdb_format(&e, small, 12);
    assert_int_equal(strlen(small), 11);
    assert_int_equal(small[12], 'x');
}

/* ---- lookup ---- */

/* The tests take their parameter values from each kernel's own search space and
 * constraint predicate, so they hold whatever parameters a kernel has. */

static int pidx(const tdacl_kernel_space *ks, const char *name)
{
    int i = tdacl__param_index(ks, name);
    if (i < 0) fail_msg("kernel %s has no parameter %s", ks->kernel, name);
    return i;
}

/* The problems every value set used below must suit. */
static const tdacl_problem LOOKUP_PROBLEMS[] = {
    {TDACL_ATTN_TRA, TDACL_F32, 64, 64, 128, 1, 0, 0, 0, 0, 0, 0, 0},
    {TDACL_ATTN_TRA, TDACL_F32, 128, 128, 128, 1, 0, 0, 0, 0, 0, 0, 0},
    {TDACL_ATTN_SOFTMAX, TDACL_F32, 64, 64, 128, 1, 0, 0, 0, 0, 0, 0, 0},
};

static int valid_for_all(const tdacl_kernel_space *ks, const tdacl_device_info *d, const int *v)
{
    char why[200];
    for (size_t i = 0; i < sizeof LOOKUP_PROBLEMS / sizeof *LOOKUP_PROBLEMS; i++)
        if (chk(ks, d, &LOOKUP_PROBLEMS[i], v, why, sizeof why)) return 0;
    return 1;
}

/* Up to `max` distinct value sets from the search space that pass the constraints of
 * every LOOKUP_PROBLEM on device d, skipping `avoid` (a set to stay away from). */
static int valid_sets(const tdacl_kernel_space *ks, const tdacl_device_info *d, const tdacl_param_values *avoid,
                      tdacl_param_values *out, int max)
{
    int idx[TDACL_MAX_PARAMS] = {0}, n = 0;
    for (;;) {
        tdacl_param_values v;
        memset(&v, 0, sizeof v);
        for (int i = 0; i < ks->nparams; i++) v.v[i] = ks->params[i].candidates[idx[i]];
        if (valid_for_all(ks, d, v.v) && (!avoid || memcmp(v.v, avoid->v, sizeof(int) * (size_t)ks->nparams))) {
            out[n++] = v;
            if (n == max) return n;
        }
        int i = ks->nparams - 1; /* next combination, odometer style */
        for (; i >= 0; i--) {
            if (idx[i] + 1 < TDACL_MAX_CANDIDATES && ks->params[i].candidates[idx[i] + 1] != TDACL_END) {
                idx[i]++;
                break;
            }
            idx[i] = 0;
        }
        if (i < 0) return n;
    }
}

/* "KERNEL KEYS : P1=v1 P2=v2 ..." */
static void entry_line(char *buf, size_t n, const char *keys, const tdacl_kernel_space *ks,
                       const tdacl_param_values *v)
{
    char params[256];
    tdacl__params_text(ks, v, params, sizeof params);
    snprintf(buf, n, "%s %s : %s", ks->kernel, keys, params);
}

static void assert_same_values(const tdacl_kernel_space *ks, const tdacl_tuned *t, const tdacl_param_values *want)
{
    if (memcmp(t->values.v, want->v, sizeof(int) * (size_t)ks->nparams)) {
        char got[256], exp[256];
        tdacl__params_text(ks, &t->values, got, sizeof got);
        tdacl__params_text(ks, want, exp, sizeof exp);
        fail_msg("got %s (from %s), expected %s", got, t->origin, exp);
    }
}

/* What the lookup gives with an empty user database: the reference for "falls back". */
static tdacl_tuned fallback_for(const char *kernel, const tdacl_problem *p)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/empty.tdb", dir);
    write_text(path, "");
    tdacl_context *ctx = make_ctx(path, 1, NULL);
    tdacl_tuned t = lookup(ctx, kernel, p);
    tdacl_context_destroy(ctx);
    assert_true(t.source != TDACL_TUNED_USER);
    return t;
}

/* The user entry the lookup of p chose, as "NAME=value ..." text (asserting it is a user one). */
static void user_params(tdacl_context *ctx, const char *kernel, const tdacl_problem *p, char *buf, size_t n)
{
    tdacl_tuned t = lookup(ctx, kernel, p);
    assert_int_equal(t.source, TDACL_TUNED_USER);
    tdacl__params_text(space(kernel), &t.values, buf, n);
}

/* Entry 0 of `text` parsed, formatted again: the line holds `key` */
static void assert_key_survives(const char *text, const char *key)
{
    tdacl_tdb db;
    assert_ok(NULL, tdacl__tdb_parse(NULL, text, strlen(text), "keys.tdb", &db));
    char line[512];
    tdacl__tdb_format(&db.entries[0], line, sizeof line);
    assert_non_null(strstr(line, key));
    tdacl__tdb_free(&db);
}

/* "dtype=tf32" keys fp32 storage on the matrix units as tf32 (4-byte tiles): it applies to
 * such problems only, and an f32 entry only to the others; both survive format -> parse. */
static void test_lookup_tf32_key(void **state)
{
    (void)state;
    char path[1024], text[1024];
    snprintf(path, sizeof path, "%s/tf32.tdb", dir);
    snprintf(text, sizeof text,
             "attention_mma class=%s kind=tra dtype=tf32 d=64 dv=64 : BN=16 NWARPS=2 MT=1 KSTAGES=3\n"
             "attention_mma class=%s kind=tra dtype=f32 d=64 dv=64 : BN=32 NWARPS=8 MT=1 KSTAGES=2\n",
             dev.arch, dev.arch);
    write_text(path, text);
    tdacl_context *ctx = make_ctx(path, 1, NULL);
    tdacl_problem tf32 = {.kind = TDACL_ATTN_TRA, .dtype = TDACL_F32, .d = 64, .dv = 64, .t = 4096, .tq = 1,
                          .mma_regs = 1, .tile_bytes = 4};
    tdacl_problem bf16c = tf32;
    bf16c.tile_bytes = 2; /* f32 storage computed in bf16 */
    char pa[128], pb[128];
    user_params(ctx, "attention_mma", &tf32, pa, sizeof pa);
    user_params(ctx, "attention_mma", &bf16c, pb, sizeof pb);
    assert_string_equal(pa, "BN=16 NWARPS=2 MT=1 KSTAGES=3");
    assert_string_equal(pb, "BN=32 NWARPS=8 MT=1 KSTAGES=2");
    tdacl_context_destroy(ctx);
    assert_key_survives(text, " dtype=tf32 ");
}

/* "adtype=" keys a matmul's activations dtype (bf16 a is copied into the tensor-core GEMM's
 * tiles as it is, f32 a is rounded on the way: their best tiles differ): an entry with it
 * applies to such calls only, outranks one without, and survives format -> parse. */
static void test_lookup_adtype_key(void **state)
{
    (void)state;
    char path[1024], text[1024];
    snprintf(path, sizeof path, "%s/adtype.tdb", dir);
    snprintf(text, sizeof text,
             "gemm_mma class=%s dtype=bf16 : GMM_BM=64 GMM_BN=128 GMM_WM=1 GMM_WN=4 GMM_BK=32 GMM_STAGES=3\n"
             "gemm_mma class=%s dtype=bf16 adtype=bf16 t=long : GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=2\n",
             dev.arch, dev.arch);
    write_text(path, text);
    tdacl_context *ctx = make_ctx(path, 1, NULL);
    tdacl_problem f32a = {.kind = -1, .dtype = TDACL_BF16, .adtype = TDACL_F32, .t = 8192, .mma_regs = 1, .tile_bytes = 2};
    tdacl_problem bf16a = f32a, bf16a_short = f32a;
    bf16a.adtype = bf16a_short.adtype = TDACL_BF16;
    bf16a_short.t = 1024;
    char pa[128], pb[128], pc[128];
    user_params(ctx, "gemm_mma", &f32a, pa, sizeof pa);
    user_params(ctx, "gemm_mma", &bf16a, pb, sizeof pb);
    user_params(ctx, "gemm_mma", &bf16a_short, pc, sizeof pc);
    assert_string_equal(pa, "GMM_BM=64 GMM_BN=128 GMM_WM=1 GMM_WN=4 GMM_BK=32 GMM_STAGES=3");
    assert_string_equal(pb, "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=2");
    assert_string_equal(pc, pa);
    tdacl_context_destroy(ctx);
    assert_key_survives(strchr(text, '\n') + 1, " adtype=bf16 ");
}

/* "bh=" keys an attention call's batch x heads (few <= 32, as in a model's batch-1 decode
 * step, where the key splits must fill the device): an entry with it applies to such calls
 * only, outranks one without, never applies to a matmul, and survives format -> parse. */
static void test_lookup_bh_key(void **state)
{
    (void)state;
    char path[1024], text[1024];
    snprintf(path, sizeof path, "%s/bh.tdb", dir);
    snprintf(text, sizeof text,
             "attention_decode class=%s kind=softmax dtype=bf16 bh=few : NTD=256 WAVES=2\n"
             "attention_decode class=%s kind=softmax dtype=bf16 : NTD=32 WAVES=32\n",
             dev.arch, dev.arch);
    write_text(path, text);
    tdacl_context *ctx = make_ctx(path, 1, NULL);
    tdacl_problem few = {.kind = TDACL_ATTN_SOFTMAX, .dtype = TDACL_BF16, .d = 64, .dv = 64, .t = 8192, .tq = 1,
                         .wide16 = 1, .bh = 12};
    tdacl_problem edge = few, many = few;
    edge.bh = TDACL_BH_FEW;
    many.bh = TDACL_BH_FEW + 1;
    char pa[128], pb[128], pc[128];
    user_params(ctx, "attention_decode", &few, pa, sizeof pa);
    user_params(ctx, "attention_decode", &edge, pb, sizeof pb);
    user_params(ctx, "attention_decode", &many, pc, sizeof pc);
    assert_string_equal(pa, "NTD=256 WAVES=2");
    assert_string_equal(pb, "NTD=256 WAVES=2");
    assert_string_equal(pc, "NTD=32 WAVES=32");
    tdacl_context_destroy(ctx);
    assert_key_survives(text, " bh=few ");
    assert_string_equal(tdacl__bh_bucket(1), "few");
    assert_string_equal(tdacl__bh_bucket(TDACL_BH_FEW + 1), "many");
    /* a matmul (bh 0) never takes a bh entry */
    snprintf(text, sizeof text,
             "gemm_mma class=%s dtype=bf16 bh=few : GMM_BM=64 GMM_BN=128 GMM_WM=1 GMM_WN=4 GMM_BK=32 GMM_STAGES=3\n",
             dev.arch);
    write_text(path, text);
    ctx = make_ctx(path, 1, NULL);
    tdacl_problem mm = {.kind = -1, .dtype = TDACL_BF16, .adtype = TDACL_BF16, .t = 8192, .mma_regs = 1, .tile_bytes = 2};
    tdacl_tuned t = lookup(ctx, "gemm_mma", &mm);
    assert_true(t.source != TDACL_TUNED_USER);
    tdacl_context_destroy(ctx);
}

/* "weights=lazy|eager" keys how tra/tda form their weights on the matrix units (lazily at
 * beta >= 1): a keyed entry applies to that loop only and outranks an unkeyed one, which
 * serves the other; both forms survive format -> parse. */
static void test_lookup_weights_key(void **state)
{
    (void)state;
    char path[1024], text[1024];
    snprintf(path, sizeof path, "%s/weights.tdb", dir);
    snprintf(text, sizeof text,
             "attention_mma class=%s kind=tda dtype=bf16 d=64 dv=64 weights=lazy : BN=64 NWARPS=4 MT=1 KSTAGES=2\n"
             "attention_mma class=%s kind=tda dtype=bf16 d=64 dv=64 : BN=32 NWARPS=4 MT=2 KSTAGES=2\n"
             "attention_mma class=%s kind=tra dtype=bf16 d=64 dv=64 weights=eager : BN=16 NWARPS=2 MT=1 KSTAGES=2\n",
             dev.arch, dev.arch, dev.arch);
    write_text(path, text);
    tdacl_context *ctx = make_ctx(path, 1, NULL);
    tdacl_problem lazy = {.kind = TDACL_ATTN_TDA, .dtype = TDACL_BF16, .d = 64, .dv = 64, .t = 8192, .tq = 1,
                          .mma_regs = 1, .tile_bytes = 2, .bh = 32, .lazy = 1};
    tdacl_problem eager = lazy, tra_lazy = lazy, tra_eager = lazy;
    eager.lazy = 0;
    tra_lazy.kind = tra_eager.kind = TDACL_ATTN_TRA;
    tra_eager.lazy = 0;
    char pa[128], pb[128], pc[128];
    user_params(ctx, "attention_mma", &lazy, pa, sizeof pa);
    user_params(ctx, "attention_mma", &eager, pb, sizeof pb);
    user_params(ctx, "attention_mma", &tra_eager, pc, sizeof pc);
    assert_string_equal(pa, "BN=64 NWARPS=4 MT=1 KSTAGES=2");
    assert_string_equal(pb, "BN=32 NWARPS=4 MT=2 KSTAGES=2");
    assert_string_equal(pc, "BN=16 NWARPS=2 MT=1 KSTAGES=2");
    tdacl_tuned t = lookup(ctx, "attention_mma", &tra_lazy); /* the eager entry is not its */
    assert_true(t.source != TDACL_TUNED_USER);
    tdacl_context_destroy(ctx);
    assert_key_survives(text, " weights=lazy ");
    assert_key_survives("attention_mma class=x kind=tra weights=eager : BN=16", " weights=eager ");
}

static void test_lookup_user_entry(void **state)
{
    (void)state;
    const tdacl_kernel_space *ks = space("attention");
    tdacl_tuned fb = fallback_for("attention", &PROBLEM);
    tdacl_param_values set[3];
    assert_int_equal(valid_sets(ks, &dev, &fb.values, set, 3), 3);

    char path[1024], keys[256], line[3][512], text[2048];
    snprintf(path, sizeof path, "%s/user.tdb", dir);
    snprintf(keys, sizeof keys, "class=%s", dev.arch);
    entry_line(line[0], sizeof line[0], keys, ks, &set[0]);
    snprintf(text, sizeof text, "# mine\n%s\n", line[0]);
    write_text(path, text);
    tu_log log = {0};
    tdacl_context *ctx = make_ctx(path, 1, &log);
    tdacl_tuned t = lookup(ctx, "attention", &PROBLEM);
    assert_int_equal(t.source, TDACL_TUNED_USER);
    assert_same_values(ks, &t, &set[0]);
    char origin[1100];
    snprintf(origin, sizeof origin, "%s:2", path);
    assert_string_equal(t.origin, origin);
    assert_string_equal(tdacl__tuned_source_name(t.source), "user");
    assert_int_equal(log.count, 0);
    /* another kernel's lookup is not affected */
    tdacl_tuned td = lookup(ctx, "attention_decode", &PROBLEM);
    assert_true(td.source != TDACL_TUNED_USER);
    tdacl_context_destroy(ctx);

    /* the same through $TDACL_TUNING_FILE */
    setenv("TDACL_TUNING_FILE", path, 1);
    ctx = make_ctx(NULL, 1, &log);
    unsetenv("TDACL_TUNING_FILE");
    t = lookup(ctx, "attention", &PROBLEM);
    assert_int_equal(t.source, TDACL_TUNED_USER);
    assert_same_values(ks, &t, &set[0]);
    tdacl_context_destroy(ctx);

    /* the most specific entry wins */
    char k1[256], k2[256];
    snprintf(k1, sizeof k1, "class=%s kind=tra d=64", dev.arch);
    snprintf(k2, sizeof k2, "class=%s kind=softmax", dev.arch);
    entry_line(line[1], sizeof line[1], k1, ks, &set[1]);
    entry_line(line[2], sizeof line[2], k2, ks, &set[2]);
    snprintf(text, sizeof text, "%s\n%s\n%s\n", line[0], line[1], line[2]);
    write_text(path, text);
    ctx = make_ctx(path, 1, &log);
    t = lookup(ctx, "attention", &LOOKUP_PROBLEMS[0]);
    assert_same_values(ks, &t, &set[1]);
    t = lookup(ctx, "attention", &LOOKUP_PROBLEMS[1]); /* d=128: the d=64 entry does not apply */
    assert_same_values(ks, &t, &set[0]);
    t = lookup(ctx, "attention", &LOOKUP_PROBLEMS[2]); /* softmax */
    assert_same_values(ks, &t, &set[2]);
    tdacl_context_destroy(ctx);

    /* a device name beats a class */
    snprintf(k2, sizeof k2, "device=\"%s\"", dev.name);
    entry_line(line[2], sizeof line[2], k2, ks, &set[2]);
    snprintf(text, sizeof text, "%s\n%s\n", line[1], line[2]);
    write_text(path, text);
    ctx = make_ctx(path, 1, &log);
    t = lookup(ctx, "attention", &PROBLEM);
    assert_same_values(ks, &t, &set[2]);
    tdacl_context_destroy(ctx);

    /* a large database: the one matching entry comes after 300 others */
    {
        size_t cap = 128 * 1024, off = 0;
        char *big = malloc(cap);
        assert_non_null(big);
        for (int i = 0; i < 300; i++) {
            snprintf(k1, sizeof k1, "class=other-%d", i);
            entry_line(line[1], sizeof line[1], k1, ks, &set[1]);
            off += (size_t)snprintf(big + off, cap - off, "%s\n", line[1]);
        }
        snprintf(big + off, cap - off, "%s\n", line[0]);
        write_text(path, big);
        free(big);
        ctx = make_ctx(path, 1, &log);
        t = lookup(ctx, "attention", &PROBLEM);
        assert_int_equal(t.source, TDACL_TUNED_USER);
        assert_same_values(ks, &t, &set[0]);
        snprintf(origin, sizeof origin, "%s:301", path);
        assert_string_equal(t.origin, origin);
        tdacl_context_destroy(ctx);
    }

    /* entries for another class, or naming neither device nor class, never apply */
    entry_line(line[1], sizeof line[1], "class=no-such-class", ks, &set[1]); /* never a device's class */
    entry_line(line[2], sizeof line[2], "kind=tra", ks, &set[2]);
    snprintf(text, sizeof text, "%s\n%s\n", line[1], line[2]);
    write_text(path, text);
    ctx = make_ctx(path, 1, &log);
    t = lookup(ctx, "attention", &PROBLEM);
    assert_true(t.source != TDACL_TUNED_USER);
    tdacl_context_destroy(ctx);
    assert_int_equal(log.count, 0);
    tu_log_clear(&log);
}

/* A database whose line 2 is `entry` falls back to the no-database result with a
 * warning that names the line and contains `why`. */
static void expect_fallback(const char *entry, const char *why)
{
    char path[1024], text[1024];
    snprintf(path, sizeof path, "%s/invalid.tdb", dir);
    snprintf(text, sizeof text, "# header\n%s\n", entry);
    write_text(path, text);
    tu_log log = {0};
    tdacl_context *ctx = make_ctx(path, 1, &log);
    tdacl_tuned t = lookup(ctx, "attention", &PROBLEM), ref = fallback_for("attention", &PROBLEM);
    assert_int_equal(t.source, ref.source);
    assert_memory_equal(&t.values, &ref.values, sizeof t.values);
    char where[1100];
    snprintf(where, sizeof where, "%s:2:", path);
    if (tu_log_find(&log, TDACL_LOG_WARN, where, why, "falling back", NULL) < 0) {
        tu_log_dump(&log);
        fail_msg("no warning naming %s and '%s'", where, why);
    }
    tdacl_context_destroy(ctx);
    tu_log_clear(&log);
}

static void test_lookup_invalid_entries_fall_back(void **state)
{
    (void)state;
    const tdacl_kernel_space *ks = space("attention");
    int bm = pidx(ks, "BM"), tm = pidx(ks, "TM");
    tdacl_param_values good[8];
    int n = valid_sets(ks, &dev, NULL, good, 8);
    assert_true(n > 0);
    char keys[256], e[512], params[256], why[200];
    snprintf(keys, sizeof keys, "class=%s", dev.arch);

    /* BM that is not a multiple of TM: the warning carries the predicate's reason */
    tdacl_param_values bad = good[0];
    assert_true(bad.v[tm] >= 2);
    bad.v[bm] += bad.v[tm] / 2;
    assert_int_not_equal(chk(ks, &dev, &PROBLEM, bad.v, why, sizeof why), 0);
    assert_contains(why, "BM=");
    entry_line(e, sizeof e, keys, ks, &bad);
    expect_fallback(e, why);

    /* an unknown parameter, a missing one, a non-positive one */
    entry_line(e, sizeof e, keys, ks, &good[0]);
    strcat(e, " XX=1");
    expect_fallback(e, "unknown parameter XX for kernel attention");
    tdacl_param_values v = good[0];
    tdacl__params_text(ks, &v, params, sizeof params);
    *strrchr(params, ' ') = 0; /* drop the last parameter */
    snprintf(e, sizeof e, "attention %s : %s", keys, params);
    char missing[64];
    snprintf(missing, sizeof missing, "parameter %s missing", ks->params[ks->nparams - 1].name);
    expect_fallback(e, missing);
    /* a repeated name is a malformed line (it once silently let the last value win) */
    {
        char rpath[1024], rtext[1024];
        entry_line(e, sizeof e, keys, ks, &good[0]);
        strcat(e, " BM=0");
        snprintf(rpath, sizeof rpath, "%s/repeated.tdb", dir);
        snprintf(rtext, sizeof rtext, "%s\n", e);
        write_text(rpath, rtext);
        tu_log rlog = {0};
        tdacl_context *rctx = make_ctx(rpath, 1, &rlog);
        assert_true(tu_log_find(&rlog, TDACL_LOG_WARN, "repeated.tdb:1:", "parameter BM is given twice", "line ignored",
                                NULL) >= 0);
        tdacl_tuned rt = lookup(rctx, "attention", &PROBLEM), rref = fallback_for("attention", &PROBLEM);
        assert_int_equal(rt.source, rref.source);
        tdacl_context_destroy(rctx);
        tu_log_clear(&rlog);
    }

    /* a rejected specific entry falls through to a valid general one of the same file */
    char path[1024], text[2048], l1[512], l2[512], k1[256];
    snprintf(path, sizeof path, "%s/fallthrough.tdb", dir);
    snprintf(k1, sizeof k1, "class=%s kind=tra d=64", dev.arch);
    entry_line(l1, sizeof l1, k1, ks, &bad);
    entry_line(l2, sizeof l2, keys, ks, &good[n - 1]);
    snprintf(text, sizeof text, "%s\n%s\n", l1, l2);
    write_text(path, text);
    tu_log log = {0};
    tdacl_context *ctx = make_ctx(path, 1, &log);
    tdacl_tuned t = lookup(ctx, "attention", &PROBLEM);
    assert_int_equal(t.source, TDACL_TUNED_USER);
    assert_same_values(ks, &t, &good[n - 1]);
    char where[1100];
    snprintf(where, sizeof where, "%s:1:", path);
    assert_true(tu_log_find(&log, TDACL_LOG_WARN, where, why, NULL) >= 0);
    tdacl_context_destroy(ctx);
    tu_log_clear(&log);
}

static void test_use_tuning_db_off(void **state)
{
    (void)state;
    const tdacl_kernel_space *ks = space("attention");
    tdacl_tuned fb = fallback_for("attention", &PROBLEM);
    tdacl_param_values set[1];
    assert_int_equal(valid_sets(ks, &dev, &fb.values, set, 1), 1);
    char path[1024], keys[256], line[512];
    snprintf(path, sizeof path, "%s/ignored.tdb", dir);
    snprintf(keys, sizeof keys, "class=%s", dev.arch);
    entry_line(line, sizeof line, keys, ks, &set[0]);
    write_text(path, line);
    tdacl_context *ctx = make_ctx(path, 0, NULL);
    tdacl_tuned t = lookup(ctx, "attention", &PROBLEM);
    assert_true(t.source == TDACL_TUNED_CLASS || t.source == TDACL_TUNED_GENERIC);
    char why[200];
    assert_int_equal(chk(ks, &dev, &PROBLEM, t.values.v, why, sizeof why), 0);
    /* a PoCL CPU device has a class default */
    if (!strncmp(dev.arch, "pocl-cpu", 8)) {
        assert_int_equal(t.source, TDACL_TUNED_CLASS);
        assert_string_equal(t.origin, "class default pocl-cpu");
    }
    tdacl_context_destroy(ctx);
}

/* Whether some rung of the kernel's generic ladder passes the constraints of p on dev. */
static int ladder_fits(const tdacl_kernel_space *ks, const tdacl_device_info *info, const tdacl_problem *p)
{
    char why[200];
    for (int i = 0; i < ks->nladder; i++) {
        tdacl_param_values lv;
        if (!tdacl__params_parse(ks, ks->ladder[i], &lv, why, sizeof why) && !tdacl__params_check(ks, info, p, &lv, why, sizeof why))
            return 1;
    }
    return 0;
}

/* Every kind, head dim and query count gets parameters that pass the constraints, from
 * the class default or, on an unknown device class, the first fitting ladder entry. */
/* When no rung of the ladder fits, the error gives every rung's reason (the last alone, "NTD=16
 * is below dv/4", hid that the larger ones need more local memory than the device has): f32
 * decode of d = 256 heads on a device of 48 KB of local memory, as on NVIDIA's OpenCL. */
static void test_no_fit_names_every_reason(void **state)
{
    (void)state;
    tdacl_context *ctx = make_ctx(NULL, 0, NULL);
    snprintf(ctx->info.arch, sizeof ctx->info.arch, "unknown-dev"); /* no class default */
    ctx->info.local_mem_bytes = 49152;
    tdacl_problem p = {TDACL_ATTN_SOFTMAX, TDACL_F32, 256, 256, 4096, 1, 0, 0, 0, 0, 0, 0, 0};
    tdacl_tuned t;
    assert_int_equal(tdacl__tuned(ctx, space("attention_decode"), &p, &t), TDACL_ERR_UNSUPPORTED);
    const char *msg = tdacl_last_error(ctx);
    assert_contains(msg, "no parameter set fits this device");
    assert_contains(msg, "NTD=128: needs");
    assert_contains(msg, "bytes of local memory");
    assert_contains(msg, "NTD=16: NTD=16 is below dv/4=64");
    tdacl_context_destroy(ctx);
}

static void test_defaults_always_valid(void **state)
{
    (void)state;
    tdacl_context *ctx = make_ctx(NULL, 0, NULL);
    const char *kernels[2] = {"attention", "attention_decode"};
    for (int fake = 0; fake < 2; fake++) {
        if (fake) snprintf(ctx->info.arch, sizeof ctx->info.arch, "unknown-dev"); /* a fresh class */
        for (int kn = 0; kn < 2; kn++) {
            const tdacl_kernel_space *ks = space(kernels[kn]);
            for (int kind = 0; kind <= TDACL_ATTN_DIFF_SOFTMAX; kind++)
                for (int d = 32; d <= 256; d *= 2)
                    for (int tq = 1; tq <= 16; tq *= 4) {
                        tdacl_problem p = {kind, TDACL_F32, d, d, 4096, tq, 0, 0, 0, 0, 0, 0, 0};
                        char why[200] = "";
                        tdacl_tuned t;
                        if (tdacl__tuned(ctx, ks, &p, &t)) {
                            /* only where nothing can fit: f32 decode of wide heads (d = 256, or
                             * 128 at 16 rows) on 48 KB of local memory, NVIDIA's OpenCL; refused
                             * by name, the documented limit (README) */
                            assert_false(ladder_fits(ks, &ctx->info, &p));
                            assert_contains(tdacl_last_error(ctx), "no parameter set fits this device");
                            continue;
                        }
                        if (chk(ks, &ctx->info, &p, t.values.v, why, sizeof why))
                            fail_msg("%s kind %d d %d tq %d: %s gave invalid values: %s", kernels[kn], kind, d, tq,
                                     t.origin, why);
                        if (fake) {
                            assert_int_equal(t.source, TDACL_TUNED_GENERIC);
                            int first = -1;
                            for (int i = 0; i < ks->nladder && first < 0; i++) {
                                tdacl_param_values lv;
                                assert_int_equal(tdacl__params_parse(ks, ks->ladder[i], &lv, why, sizeof why), 0);
                                if (!tdacl__params_check(ks, &ctx->info, &p, &lv, why, sizeof why)) first = i;
                            }
                            char want[64];
                            snprintf(want, sizeof want, "generic ladder #%d", first);
                            assert_string_equal(t.origin, want);
                        }
                    }
        }
    }
    tdacl_context_destroy(ctx);
}

/* ---- constraints, on a synthetic device so the limits are known ---- */

static tdacl_device_info roomy(void)
{
    tdacl_device_info d;
    memset(&d, 0, sizeof d);
    d.max_work_group_size = 1024;
    d.max_work_item_sizes[0] = d.max_work_item_sizes[1] = d.max_work_item_sizes[2] = 1024;
    d.local_mem_bytes = 1 << 24;
    return d;
}

static void expect_reject(const tdacl_kernel_space *ks, const tdacl_device_info *d, const tdacl_problem *p,
                          const int *v, const char *why_part, int line)
{
    char why[200] = "";
    if (!chk(ks, d, p, v, why, sizeof why)) fail_msg("line %d: values accepted", line);
    if (!strstr(why, why_part)) fail_msg("line %d: reason \"%s\" lacks \"%s\"", line, why, why_part);
}
#define REJECT(ks, d, p, vals, why) expect_reject(ks, d, p, (vals).v, why, __LINE__)

/* The smallest local memory with which `v` passes (the check is monotonic in it). */
static uint64_t min_local_mem(const tdacl_kernel_space *ks, tdacl_device_info d, const tdacl_problem *p, const int *v)
{
    char why[200];
    uint64_t lo = 0, hi = d.local_mem_bytes; /* passes at hi */
    while (hi - lo > 1) {
        d.local_mem_bytes = lo + (hi - lo) / 2;
        if (chk(ks, &d, p, v, why, sizeof why)) lo = d.local_mem_bytes;
        else hi = d.local_mem_bytes;
    }
    return hi;
}

static void test_constraints(void **state)
{
    (void)state;
    const tdacl_kernel_space *ks = space("attention");
    int bm = pidx(ks, "BM"), bn = pidx(ks, "BN"), tm = pidx(ks, "TM"), tn = pidx(ks, "TN");
    tdacl_device_info d = roomy();
    tdacl_problem p = PROBLEM;
    char why[200];
    /* a valid set with several work-items (BM > TM) to start from */
    tdacl_param_values sets[64], good;
    int n = valid_sets(ks, &d, NULL, sets, 64), gi = -1;
    for (int i = 0; i < n && gi < 0; i++)
        if (sets[i].v[bm] >= 2 * sets[i].v[tm] && sets[i].v[tm] >= 2 && sets[i].v[tn] >= 2) gi = i;
    assert_true(gi >= 0);
    good = sets[gi];
    assert_int_equal(chk(ks, &d, &p, good.v, why, sizeof why), 0);
    tdacl_param_values v;
    v = good, v.v[bm] += v.v[tm] / 2;
    REJECT(ks, &d, &p, v, "is not a multiple of TM");
    v = good, v.v[bn] += v.v[tn] / 2;
    REJECT(ks, &d, &p, v, "is not a multiple of TN");
    v = good, v.v[bm] = 1024 * v.v[tm];
    REJECT(ks, &d, &p, v, "too large");
    v = good, v.v[bm] = 0;
    REJECT(ks, &d, &p, v, "positive");
    v = good, v.v[tn] = -v.v[tn];
    REJECT(ks, &d, &p, v, "positive");
    /* too many work-items for the device */
    d.max_work_group_size = 1;
    REJECT(ks, &d, &p, good, "work-group limit 1");
    d = roomy();
    d.max_work_item_sizes[0] = 1;
    REJECT(ks, &d, &p, good, "work-group limit");
    /* local memory: the least that suffices passes, one byte less fails */
    d = roomy();
    d.local_mem_bytes = min_local_mem(ks, d, &p, good.v);
    assert_true(d.local_mem_bytes > 1024); /* the tiles need real space */
    assert_int_equal(chk(ks, &d, &p, good.v, why, sizeof why), 0);
    d.local_mem_bytes--;
    REJECT(ks, &d, &p, good, "bytes of local memory");
    /* two-view kinds hold two sets of q and k tiles */
    tdacl_problem two = p;
    two.kind = TDACL_ATTN_TDA;
    assert_true(min_local_mem(ks, roomy(), &two, good.v) > min_local_mem(ks, roomy(), &p, good.v));

    const tdacl_kernel_space *dk = space("attention_decode");
    int ntd = pidx(dk, "NTD");
    d = roomy();
    tdacl_problem q = {TDACL_ATTN_TRA, TDACL_F32, 128, 128, 4096, 1, 0, 0, 0, 0, 0, 0, 0};
    tdacl_tuned dt;
    tdacl_context *ctx = make_ctx(NULL, 0, NULL);
    dt = lookup(ctx, "attention_decode", &q);
    tdacl_context_destroy(ctx);
    tdacl_param_values dg = dt.values;
    assert_int_equal(chk(dk, &d, &q, dg.v, why, sizeof why), 0);
    v = dg, v.v[ntd] = 16;
    REJECT(dk, &d, &q, v, "NTD=16 is below dv/4=32");
    v = dg, v.v[ntd] = 0;
    REJECT(dk, &d, &q, v, "positive");
    d.max_work_group_size = (size_t)dg.v[ntd] - 1;
    REJECT(dk, &d, &q, dg, "exceed the device's work-group limit");
    d = roomy();
    q.tq = 5; /* more query rows need more local memory */
    d.local_mem_bytes = min_local_mem(dk, d, &q, dg.v);
    assert_int_equal(chk(dk, &d, &q, dg.v, why, sizeof why), 0);
    d.local_mem_bytes--;
    REJECT(dk, &d, &q, dg, "bytes of local memory");
    tdacl_problem q1 = q;
    q1.tq = 1;
    assert_true(min_local_mem(dk, roomy(), &q1, dg.v) < min_local_mem(dk, roomy(), &q, dg.v));

    assert_null(tdacl__variant_of_space("no_such_kernel"));
    assert_true(tdacl__variant_at(0) != NULL && tdacl__variant_at(-1) == NULL);
    int nrows = 0, nspaces = 0;
    while (tdacl__variant_at(nrows)) nspaces += tdacl__variant_at(nrows++)->space != NULL;
    assert_true(nspaces >= 4);
    assert_int_equal(tdacl__param_index(ks, "XX"), -1);
    /* parameter text and build options name every parameter (options: macros only) */
    for (int s = 0; s < nrows; s++) {
        const tdacl_kernel_space *k = tdacl__variant_at(s)->space;
        if (!k) continue;
        tdacl_param_values pv;
        char text[256], want_text[256] = "", want_opts[256] = "";
        for (int i = 0; i < k->nparams; i++) {
            pv.v[i] = 3 + 5 * i;
            size_t l = strlen(want_text), o = strlen(want_opts);
            snprintf(want_text + l, sizeof want_text - l, "%s%s=%d", i ? " " : "", k->params[i].name, pv.v[i]);
            if (k->params[i].is_macro)
                snprintf(want_opts + o, sizeof want_opts - o, " -D%s=%d", k->params[i].name, pv.v[i]);
            assert_int_equal(tdacl__param_index(k, k->params[i].name), i);
            assert_true(k->params[i].candidates[0] != TDACL_END);
        }
        tdacl__params_text(k, &pv, text, sizeof text);
        assert_string_equal(text, want_text);
        tdacl_strbuf sb = {0};
        tdacl__sb_printf(&sb, "%s", "");
        tdacl__params_options(k, &pv, &sb);
        assert_string_equal(sb.data, want_opts);
        tdacl__sb_free(&sb);
    }
}

static void test_small_helpers(void **state)
{
    (void)state;
    assert_string_equal(tdacl__t_bucket(0), "short");
    assert_string_equal(tdacl__t_bucket(1024), "short");
    assert_string_equal(tdacl__t_bucket(1025), "long");
    assert_int_equal(tdacl__kind_from_name("tda"), TDACL_ATTN_TDA);
    assert_int_equal(tdacl__kind_from_name("diff_softmax"), TDACL_ATTN_DIFF_SOFTMAX);
    assert_int_equal(tdacl__kind_from_name("TDA"), -2);
    assert_string_equal(tdacl__kind_name(TDACL_ATTN_RELA), "rela");
    assert_string_equal(tdacl__kind_name(-1), "any");
    assert_string_equal(tdacl__kind_name(99), "?");
    assert_int_equal(tdacl__dtype_from_name("fp16"), TDACL_F16);
    assert_int_equal(tdacl__dtype_from_name("bf16"), TDACL_BF16);
    assert_int_equal(tdacl__dtype_from_name("f64"), -2);
    assert_string_equal(tdacl__tuned_source_name(TDACL_TUNED_GENERIC), "generic");
    assert_string_equal(tdacl__tuned_source_name((tdacl_tuned_source)9), "?");
}

static void test_user_path(void **state)
{
    (void)state;
    char buf[1024];
    char *xdg = getenv("XDG_CONFIG_HOME") ? strdup(getenv("XDG_CONFIG_HOME")) : NULL;
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("TDACL_TUNING_FILE", "/from/env.tdb", 1);
    tdacl__tdb_user_path("/explicit.tdb", buf, sizeof buf);
    assert_string_equal(buf, "/explicit.tdb");
    tdacl__tdb_user_path(NULL, buf, sizeof buf);
    assert_string_equal(buf, "/from/env.tdb");
    tdacl__tdb_user_path("", buf, sizeof buf);
    assert_string_equal(buf, "/from/env.tdb");
    unsetenv("TDACL_TUNING_FILE");
    setenv("XDG_CONFIG_HOME", "/xdg", 1);
    tdacl__tdb_user_path(NULL, buf, sizeof buf);
    assert_string_equal(buf, "/xdg/tdacl/tuning.tdb");
    unsetenv("XDG_CONFIG_HOME");
    setenv("HOME", "/home/someone", 1);
    tdacl__tdb_user_path(NULL, buf, sizeof buf);
    assert_string_equal(buf, "/home/someone/.config/tdacl/tuning.tdb");
    unsetenv("HOME");
    tdacl__tdb_user_path(NULL, buf, sizeof buf);
    assert_string_equal(buf, "");
    if (xdg) setenv("XDG_CONFIG_HOME", xdg, 1);
    if (home) setenv("HOME", home, 1);
    free(xdg);
    free(home);
}

static void test_missing_or_odd_files(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/absent.tdb", dir);
    tu_log log = {0};
    tdacl_context *ctx = make_ctx(path, 1, &log);
    assert_true(tu_log_find(&log, TDACL_LOG_WARN, path, "cannot be read", NULL) >= 0);
    tdacl_tuned t = lookup(ctx, "attention", &PROBLEM);
    assert_true(t.source != TDACL_TUNED_USER);
    tdacl_context_destroy(ctx);
    tu_log_clear(&log);
    /* a directory, a device or a FIFO as the database: one warning, never a failure or a
     * hang (a FIFO with no writer would block a plain open) */
    char fifo[1100];
    snprintf(fifo, sizeof fifo, "%s/fifo.tdb", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    const char *odd[] = {dir, "/dev/zero", fifo};
    for (int i = 0; i < 3; i++) {
        ctx = make_ctx(odd[i], 1, &log);
        if (tu_log_find(&log, TDACL_LOG_WARN, odd[i], "not a regular file", "using defaults", NULL) < 0) {
            tu_log_dump(&log);
            fail_msg("no warning for %s", odd[i]);
        }
        t = lookup(ctx, "attention", &PROBLEM);
        assert_true(t.source != TDACL_TUNED_USER);
        tdacl_context_destroy(ctx);
        tu_log_clear(&log);
    }
    unlink(fifo);
    /* the same through $TDACL_TUNING_FILE (it once said nothing) */
    char *saved = getenv("TDACL_TUNING_FILE") ? strdup(getenv("TDACL_TUNING_FILE")) : NULL;
    setenv("TDACL_TUNING_FILE", path, 1); /* absent.tdb */
    ctx = make_ctx(NULL, 1, &log);
    assert_true(tu_log_find(&log, TDACL_LOG_WARN, path, "cannot be read", NULL) >= 0);
    tdacl_context_destroy(ctx);
    tu_log_clear(&log);
    if (saved) setenv("TDACL_TUNING_FILE", saved, 1);
    else unsetenv("TDACL_TUNING_FILE");
    free(saved);
    unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(i * 131 + 7);
    snprintf(path, sizeof path, "%s/junk.tdb", dir);
    tu_write_file(path, junk, sizeof junk);
    ctx = make_ctx(path, 1, &log);
    t = lookup(ctx, "attention", &PROBLEM);
    assert_true(t.source != TDACL_TUNED_USER);
    assert_true(log.count > 0);
    tdacl_context_destroy(ctx);
    tu_log_clear(&log);
}

/* 20,000 applicable but rejected entries and 20,000 malformed lines: the file is parsed
 * once per context, the lookup sorts the candidates once (it was quadratic), warnings are
 * capped with a summary, and a second lookup of the same problem warns no more. */
static void test_many_rejected_entries(void **state)
{
    (void)state;
    const tdacl_kernel_space *ks = space("attention");
    int bm = pidx(ks, "BM"), tm = pidx(ks, "TM");
    tdacl_param_values good[2];
    assert_true(valid_sets(ks, &dev, NULL, good, 2) > 0);
    tdacl_param_values bad = good[0];
    bad.v[bm] += bad.v[tm] / 2; /* not a multiple of TM */
    char keys[256], line[512], path[1024];
    snprintf(keys, sizeof keys, "class=%s", dev.arch);
    entry_line(line, sizeof line, keys, ks, &bad);
    enum { REJECTED = 20000, MALFORMED = 20000 };
    size_t cap = (size_t)REJECTED * (strlen(line) + 1) + (size_t)MALFORMED * 40 + 64, off = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    for (int i = 0; i < REJECTED; i++) off += (size_t)snprintf(text + off, cap - off, "%s\n", line);
    for (int i = 0; i < MALFORMED; i++) off += (size_t)snprintf(text + off, cap - off, "attention class=x : BM=oops\n");
    snprintf(path, sizeof path, "%s/many.tdb", dir);
    tu_write_file(path, text, off);
    free(text);
    tu_log log = {0};
    tdacl_context *ctx = make_ctx(path, 1, &log);
    /* parse: the entry cap, then at most TDACL_TDB_MAX_WARNINGS line warnings + summaries */
    assert_true(tu_log_find(&log, TDACL_LOG_WARN, "more than", "entries; the rest", NULL) >= 0);
    int after_parse = log.count;
    assert_true(after_parse <= TDACL_TDB_MAX_WARNINGS + 2);
    tdacl_tuned t = lookup(ctx, "attention", &PROBLEM), ref = fallback_for("attention", &PROBLEM);
    assert_int_equal(t.source, ref.source);
    assert_memory_equal(&t.values, &ref.values, sizeof t.values);
    int after_first = log.count;
    assert_true(after_first - after_parse <= TDACL_TDB_MAX_WARNINGS + 1);
    assert_true(tu_log_find(&log, TDACL_LOG_WARN, "more entries for kernel attention rejected", NULL) >= 0);
    for (int i = 0; i < 100; i++) lookup(ctx, "attention", &PROBLEM);
    assert_int_equal(log.count, after_first);
    tdacl_context_destroy(ctx);
    tu_log_clear(&log);
}

/* ---- updating a database file ---- */

static tdacl_tdb_entry entry(const char *arch, int kind, int bm)
{
    tdacl_tdb_entry e;
    tdacl__tdb_entry_init(&e);
    snprintf(e.kernel, sizeof e.kernel, "attention");
    snprintf(e.arch, sizeof e.arch, "%s", arch);
    e.kind = kind;
    e.nparams = 4;
    const char *n[4] = {"BM", "BN", "TM", "TN"};
    const int v[4] = {bm, 16, 4, 4};
    for (int i = 0; i < 4; i++) snprintf(e.pname[i], sizeof e.pname[i], "%s", n[i]), e.pvalue[i] = v[i];
    return e;
}

static tdacl_tdb read_db(const char *path)
{
    size_t len = 0;
    char *text = (char *)tu_read_file(path, &len);
    assert_non_null(text);
    tdacl_tdb db;
    assert_ok(NULL, tdacl__tdb_parse(NULL, text, len, path, &db));
    free(text);
    return db;
}

static void test_upsert(void **state)
{
    (void)state;
    tdacl_context *ctx = make_ctx(NULL, 0, NULL);
    char path[1024];
    snprintf(path, sizeof path, "%s/sub/dir/tuning.tdb", dir); /* directories made on demand */
    tdacl_tdb_entry a = entry("cls-a", TDACL_ATTN_TRA, 32), b = entry("cls-b", -1, 64);
    assert_ok(ctx, tdacl__tdb_upsert_file(ctx, path, &a));
    tdacl_tdb db = read_db(path);
    assert_int_equal(db.count, 1);
    assert_entry_equal(&db.entries[0], &a);
    tdacl__tdb_free(&db);

    assert_ok(ctx, tdacl__tdb_upsert_file(ctx, path, &b));
    db = read_db(path);
    assert_int_equal(db.count, 2);
    assert_entry_equal(&db.entries[1], &b);
    int line_a = db.entries[0].line;
    tdacl__tdb_free(&db);

    /* hand-written lines (a comment, a bad line) survive an update */
    size_t len = 0;
    char *text = (char *)tu_read_file(path, &len);
    char more[4096];
    snprintf(more, sizeof more, "%s# keep me\nattention this line is bad\n", text);
    free(text);
    write_text(path, more);

    /* same keys: replaced in place, not appended */
    tdacl_tdb_entry a2 = entry("cls-a", TDACL_ATTN_TRA, 8);
    snprintf(a2.comment, sizeof a2.comment, "retuned");
    assert_ok(ctx, tdacl__tdb_upsert_file(ctx, path, &a2));
    db = read_db(path);
    assert_int_equal(db.count, 2);
    assert_int_equal(db.entries[0].line, line_a);
    assert_entry_equal(&db.entries[0], &a2);
    assert_entry_equal(&db.entries[1], &b);
    tdacl__tdb_free(&db);
    text = (char *)tu_read_file(path, &len);
    assert_contains(text, "# keep me\n");
    assert_contains(text, "attention this line is bad\n");
    free(text);
    /* a different kind is a different key */
    tdacl_tdb_entry a3 = entry("cls-a", TDACL_ATTN_TDA, 16);
    assert_ok(ctx, tdacl__tdb_upsert_file(ctx, path, &a3));
    db = read_db(path);
    assert_int_equal(db.count, 3);
    tdacl__tdb_free(&db);
    char parent[1024];
    snprintf(parent, sizeof parent, "%s/sub/dir", dir);
    assert_int_equal(tu_count_files(parent, ".tmp.", 1, NULL, 0), 0);

    /* an impossible path fails with TDACL_ERR_IO */
    char file[1024], bad[1100];
    snprintf(file, sizeof file, "%s/plain", dir);
    write_text(file, "x");
    snprintf(bad, sizeof bad, "%s/below/tuning.tdb", file);
    assert_status(ctx, tdacl__tdb_upsert_file(ctx, bad, &a), TDACL_ERR_IO);
    assert_contains(tdacl_last_error(ctx), bad);
    tdacl_context_destroy(ctx);
}

/* tdacl tune --import-clblast: a CLBlast tuner result into a database entry of this device */
static void test_clblast_import(void **state)
{
    (void)state;
    tdacl_context *ctx = make_ctx(NULL, 0, NULL);
    char json[1024], db_path[1024];
    snprintf(json, sizeof json, "%s/clblast.json", dir);
    snprintf(db_path, sizeof db_path, "%s/imported.tdb", dir);
    write_text(json, "{\"kernel_family\": \"xgemm_1\", \"precision\": \"32\", \"best_time\": \"1.25\", "
                     "\"best_parameters\": \"GEMMK=0 KREG=1 KWG=32 MWG=64 PRECISION=32 NWG=128 VWM=4\"}");
    assert_ok(ctx, tdacl__clblast_import(ctx, json, db_path));
    tdacl_tdb db = read_db(db_path);
    assert_int_equal(db.count, 1);
    const tdacl_tdb_entry *e = &db.entries[0];
    assert_string_equal(e->kernel, "clblast_xgemm");
    assert_int_equal(e->dtype, TDACL_F32);
    assert_string_equal(e->arch, ctx->info.arch);
    const char *names[6] = {"GEMMK", "KREG", "KWG", "MWG", "NWG", "VWM"}; /* PRECISION left out */
    const int values[6] = {0, 1, 32, 64, 128, 4};
    assert_int_equal(e->nparams, 6);
    for (int i = 0; i < 6; i++) {
        assert_string_equal(e->pname[i], names[i]);
        assert_int_equal(e->pvalue[i], values[i]);
    }
    assert_contains(e->comment, "1.25");
    tdacl__tdb_free(&db);

    /* a direct-GEMM half-precision result: a second entry */
    write_text(json, "{\"kernel_family\": \"xgemm_direct_1\", \"precision\": \"16\", "
                     "\"best_parameters\": \"WGD=16 MDIMCD=8\"}");
    assert_ok(ctx, tdacl__clblast_import(ctx, json, db_path));
    db = read_db(db_path);
    assert_int_equal(db.count, 2);
    assert_string_equal(db.entries[1].kernel, "clblast_xgemm_direct");
    assert_int_equal(db.entries[1].dtype, TDACL_F16);
    assert_int_equal(db.entries[1].nparams, 2);
    assert_int_equal(db.entries[1].pvalue[0], 16);
    tdacl__tdb_free(&db);

    /* refused, each by name; the database keeps its two entries */
    static const struct {
        const char *text, *says;
        tdacl_status st;
    } bad[] = {
        {"not json at all", "is not JSON", TDACL_ERR_FORMAT},
        {"{\"kernel_family\": \"xgemm_1\", \"precision\": \"32\"}", "kernel_family, precision, best_parameters",
         TDACL_ERR_FORMAT},
        {"{\"kernel_family\": \"xgemm_1\", \"precision\": \"64\", \"best_parameters\": \"KWG=32\"}",
         "precision 64 is not imported", TDACL_ERR_UNSUPPORTED},
        {"{\"kernel_family\": \"xgemm_1\", \"precision\": \"32\", \"best_parameters\": \"PRECISION=32 junk\"}",
         "no parameters in best_parameters", TDACL_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_text(json, bad[i].text);
        assert_status(ctx, tdacl__clblast_import(ctx, json, db_path), bad[i].st);
        assert_contains(tdacl_last_error(ctx), bad[i].says);
        assert_contains(tdacl_last_error(ctx), json);
    }
    char many[4096] = "{\"kernel_family\": \"xgemm_1\", \"precision\": \"32\", \"best_parameters\": \"";
    for (int i = 0; i < TDACL_MAX_PARAMS + 1; i++) snprintf(many + strlen(many), sizeof many - strlen(many), "P%d=%d ", i, i);
    snprintf(many + strlen(many), sizeof many - strlen(many), "\"}");
    write_text(json, many);
    assert_status(ctx, tdacl__clblast_import(ctx, json, db_path), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(ctx), "more than");
    char missing[1100];
    snprintf(missing, sizeof missing, "%s/no-such.json", dir);
    assert_status(ctx, tdacl__clblast_import(ctx, missing, db_path), TDACL_ERR_IO);
    assert_contains(tdacl_last_error(ctx), missing);
    db = read_db(db_path);
    assert_int_equal(db.count, 2);
    tdacl__tdb_free(&db);
    tdacl_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad_lines),
        cmocka_unit_test(test_format_roundtrip),
        cmocka_unit_test(test_lookup_user_entry),
        cmocka_unit_test(test_lookup_tf32_key),
        cmocka_unit_test(test_lookup_adtype_key),
        cmocka_unit_test(test_lookup_bh_key),
        cmocka_unit_test(test_lookup_weights_key),
        cmocka_unit_test(test_no_fit_names_every_reason),
        cmocka_unit_test(test_lookup_invalid_entries_fall_back),
        cmocka_unit_test(test_use_tuning_db_off),
        cmocka_unit_test(test_defaults_always_valid),
        cmocka_unit_test(test_constraints),
        cmocka_unit_test(test_small_helpers),
        cmocka_unit_test(test_user_path),
        cmocka_unit_test(test_missing_or_odd_files),
        cmocka_unit_test(test_many_rejected_entries),
        cmocka_unit_test(test_upsert),
        cmocka_unit_test(test_clblast_import),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
