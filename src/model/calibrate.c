/* Top-theta calibration (docs/spec.md section 4.7; the Top-theta paper's Algorithm 1).
 *
 *   for each calibration sequence (prefill from position 0):
 *     for each layer l, before its attention (the hook, on the host in double):
 *       s = scale * q k^T of every head (causal rows; post-softmax: the softmax weights)
 *       row r with n = r + 1 > k_l keys: theta_sample = midpoint of its k-th and (k+1)-th
 *         largest values; Theta[l, h, r] += theta_sample (and its square, and the count);
 *         pre-softmax: eta[l, h, r] += ln sum of e^s over the keys below theta_sample
 *       the layer's attention then runs Top-theta with the theta_sample of each row: exactly
 *         top-k, so later layers see what they will see once thresholds are deployed
 *   theta[l, h, r] = mean + offset_std * std of Theta[l, h, r]; eta: its mean
 *
 * The scores are recomputed on the host from the layer's q and k as the device holds them, the
 * heads spread over threads (one a core, at most one a head). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/fileio.h"
#include "base/kinds.h"
#include "model/model.h"
#include "model/model_impl.h"
#include "model/thresholds.h"

#define MAX_FIT_DEGREE 3

typedef struct calib {
    const tdacl_calibrate_desc *desc;
    int L, H, S, d, C, ld;
    int *k;            /* [L] */
    double *sum, *sq, *eta; /* [L, H, S] */
    int64_t *count;    /* [L, H, S] */
    float *host_qkv;   /* [S, ld] */
    float *table;      /* [H, S] this sequence's thresholds */
    int nthreads;
    double *scratch;   /* [nthreads][2][S]: each thread's row values and selection copy */
    tdacl_tensor *dev_table; /* [H, S] */
} calib;

/* One thread's share of a layer: heads h0, h0 + step, ... of a sequence of T tokens. */
typedef struct calib_job {
    calib *c;
    int l, T, h0, step;
    double *vals, *work;
} calib_job;

void tdacl_calibrate_desc_init(tdacl_calibrate_desc *desc)
{
    if (!desc) return;
    memset(desc, 0, sizeof *desc);
    desc->k = 64;
    desc->fit_degree = -1;
}

/* The k-th largest (1-based) of x[0..n), n > k, reordering x: quickselect. */
static double kth_largest(double *x, int n, int k)
{
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        const double pivot = x[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (x[i] > pivot) i++;
            while (x[j] < pivot) j--;
            if (i <= j) {
                double t = x[i];
                x[i] = x[j], x[j] = t;
                i++, j--;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else return x[want];
    }
    return x[want];
}

/* Row r of head h in layer l: records its sample threshold and returns it (vals, work: [n]
 * scratch of the calling thread). */
static double row_threshold(calib *c, int l, int h, int r, const float *q, int n, double *vals, double *work)
{
    const int kk = c->k[l];
    const double scale = 1.0 / sqrt((double)c->d);
    double m = -INFINITY;
    for (int j = 0; j < n; j++) {
        const float *kj = c->host_qkv + (size_t)j * c->ld + c->C + (size_t)h * c->d;
        double acc = 0.0;
        for (int e = 0; e < c->d; e++) acc += (double)q[e] * kj[e];
        vals[j] = scale * acc;
        if (vals[j] > m) m = vals[j];
    }
    if (c->desc->theta_post) { /* the softmax weights */
        double z = 0.0;
        for (int j = 0; j < n; j++) z += exp(vals[j] - m);
        for (int j = 0; j < n; j++) vals[j] = exp(vals[j] - m) / z;
    }
    memcpy(work, vals, (size_t)n * sizeof *work);
    const double a = kth_largest(work, n, kk);
    double b = -INFINITY; /* the (k+1)-th: the largest of what quickselect left after position k - 1 */
    for (int j = kk; j < n; j++) b = work[j] > b ? work[j] : b;
    const double theta = 0.5 * (a + b);
    const size_t at = ((size_t)l * c->H + h) * c->S + r;
    c->sum[at] += theta, c->sq[at] += theta * theta, c->count[at]++;
    if (!c->desc->theta_post) { /* ln of the dropped keys' summed e^s */
        double z = 0.0;
        for (int j = 0; j < n; j++) z += vals[j] < theta ? exp(vals[j] - b) : 0.0;
        c->eta[at] += b + log(z > 1e-300 ? z : 1e-300); /* z = 0 only when the k-th and (k+1)-th tie */
    }
    return theta;
}

static void *heads_job(void *arg)
{
    calib_job *j = arg;
    calib *c = j->c;
    for (int h = j->h0; h < c->H; h += j->step)
        for (int r = 0; r < c->S; r++) {
            float *t = &c->table[(size_t)h * c->S + r];
            if (r >= j->T) *t = r ? t[-1] : -INFINITY; /* unread: rows past this sequence */
            else if (r + 1 <= c->k[j->l]) *t = -INFINITY;
            else
                *t = (float)row_threshold(c, j->l, h, r, c->host_qkv + (size_t)r * c->ld + (size_t)h * c->d, r + 1,
                                          j->vals, j->work);
        }
    return NULL;
}

static tdacl_status hook(tdacl_model *m, int l, int B, int T, void *user)
{
    calib *c = user;
    (void)B;
    tdacl_tensor *rows = NULL;
    int64_t shape[2] = {T, c->ld}, strides[2] = {c->ld, 1};
    tdacl_status st = tdacl_tensor_view(m->qkv, 2, shape, strides, 0, &rows);
    if (!st) st = tdacl_tensor_download(rows, c->host_qkv, TDACL_F32, (int64_t)T * c->ld);
    tdacl_tensor_destroy(rows);
    if (st) return st;
    const int nt = c->nthreads < 1 ? 1 : c->nthreads > 64 ? 64 : c->nthreads; /* (set to 1..64) */
    pthread_t threads[64];
    calib_job jobs[64];
    int running[64] = {0};
    for (int i = 0; i < nt; i++)
        jobs[i] = (calib_job){c, l, T, i, nt, c->scratch + (size_t)2 * i * c->S,
                              c->scratch + (size_t)(2 * i + 1) * c->S};
    for (int i = 1; i < nt; i++) running[i] = !pthread_create(&threads[i], NULL, heads_job, &jobs[i]);
    heads_job(&jobs[0]);
    for (int i = 1; i < nt; i++) {
        if (running[i]) pthread_join(threads[i], NULL);
        else heads_job(&jobs[i]); /* a thread that could not start: its share runs here */
    }
    st = tdacl_tensor_upload(c->dev_table, c->table, TDACL_F32, (int64_t)c->H * c->S);
    m->layers[l].thresholds = c->dev_table;
    return st;
}

/* Least squares of y on powers of x = ln(r + 1) (degree deg) over the rows with samples:
 * the normal equations, solved with partial pivoting. */
static int fit_poly(const double *y, const int64_t *cnt, int first, int S, int deg, double *coef)
{
    const int n = deg + 1;
    double A[MAX_FIT_DEGREE + 1][MAX_FIT_DEGREE + 2] = {{0}};
    for (int r = first; r < S; r++) {
        if (!cnt[r]) continue;
        double p[2 * MAX_FIT_DEGREE + 1], x = log((double)r + 1.0);
        p[0] = 1.0;
        for (int i = 1; i <= 2 * deg; i++) p[i] = p[i - 1] * x;
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) A[i][j] += p[i + j];
            A[i][n] += p[i] * y[r];
        }
    }
    for (int i = 0; i < n; i++) {
        int piv = i;
        for (int j = i + 1; j < n; j++)
            if (fabs(A[j][i]) > fabs(A[piv][i])) piv = j;
        if (fabs(A[piv][i]) < 1e-300) return -1;
        for (int j = 0; j <= n; j++) {
            double t = A[i][j];
            A[i][j] = A[piv][j], A[piv][j] = t;
        }
        for (int j = 0; j < n; j++) {
            if (j == i) continue;
            double f = A[j][i] / A[i][i];
            for (int e = i; e <= n; e++) A[j][e] -= f * A[i][e];
        }
    }
    for (int i = 0; i < n; i++) coef[i] = A[i][n] / A[i][i];
    return 0;
}

/* The threshold file of the accumulated samples. */
static tdacl_status write_file(tdacl_context *ctx, const calib *c, const char *path, int64_t sequences, int64_t tokens)
{
    const tdacl_calibrate_desc *d = c->desc;
    cJSON *root = cJSON_CreateObject();
    int ok = root && cJSON_AddStringToObject(root, "format", TDACL_THRESHOLDS_FORMAT) &&
             cJSON_AddNumberToObject(root, "version", 1) &&
             cJSON_AddStringToObject(root, "mode", d->theta_post ? "post" : "pre") &&
             cJSON_AddNumberToObject(root, "n_layer", c->L) && cJSON_AddNumberToObject(root, "n_head", c->H);
    cJSON *layers = ok ? cJSON_AddArrayToObject(root, "layers") : NULL;
    double *y = malloc((size_t)c->S * sizeof *y);
    ok = ok && layers && y;
    tdacl_status st = TDACL_SUCCESS;
    for (int l = 0; ok && !st && l < c->L; l++) {
        const int first = c->k[l];
        int last = first - 1; /* the last row with samples (every head has the same rows) */
        for (int r = first; r < c->S; r++)
            if (c->count[(size_t)l * c->H * c->S + r]) last = r;
        if (last < first) {
            st = tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "tdacl_model_calibrate: no calibration sequence is longer "
                             "than k = %d keys (layer %d)", first, l);
            break;
        }
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(layers, o) && cJSON_AddNumberToObject(o, "k", first) &&
             cJSON_AddNumberToObject(o, "first_row", first);
        cJSON *th = ok ? cJSON_AddArrayToObject(o, d->fit_degree >= 0 ? "fit" : "thresholds") : NULL;
        cJSON *mass = ok && !d->theta_post ? cJSON_AddArrayToObject(o, "sdc_log_mass") : NULL;
        ok = ok && th && (d->theta_post || mass);
        for (int h = 0; ok && h < c->H; h++) {
            const size_t base = ((size_t)l * c->H + h) * c->S;
            const int64_t *cnt = c->count + base;
            for (int r = first; r <= last; r++) {
                const double n = (double)cnt[r], mean = n ? c->sum[base + r] / n : 0.0;
                const double var = n ? c->sq[base + r] / n - mean * mean : 0.0;
                y[r] = mean + d->offset_std * sqrt(var > 0.0 ? var : 0.0);
            }
            cJSON *row = cJSON_CreateArray();
            ok = row && cJSON_AddItemToArray(th, row);
            if (d->fit_degree >= 0) {
                double coef[MAX_FIT_DEGREE + 1];
                if (fit_poly(y, cnt, first, last + 1, d->fit_degree, coef)) {
                    st = tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "tdacl_model_calibrate: a degree %d fit needs "
                                     "more calibrated rows than layer %d has (%d)", d->fit_degree, l, last - first + 1);
                    break;
                }
                for (int i = 0; ok && i <= d->fit_degree; i++) ok = cJSON_AddItemToArray(row, cJSON_CreateNumber(coef[i]));
            } else {
                /* a row without samples (a gap) takes the row before it */
                for (int r = first; ok && r <= last; r++) {
                    if (!cnt[r]) y[r] = y[r - 1];
                    ok = cJSON_AddItemToArray(row, cJSON_CreateNumber(y[r]));
                }
            }
            if (mass) {
                cJSON *mr = cJSON_CreateArray();
                ok = ok && mr && cJSON_AddItemToArray(mass, mr);
                double prev = 0.0;
                for (int r = first; ok && r <= last; r++) {
                    prev = cnt[r] ? c->eta[base + r] / (double)cnt[r] : prev;
                    ok = cJSON_AddItemToArray(mr, cJSON_CreateNumber(prev));
                }
            }
        }
    }
    cJSON *cal = ok && !st ? cJSON_AddObjectToObject(root, "calibration") : NULL;
    ok = ok && (st || (cal && cJSON_AddNumberToObject(cal, "sequences", (double)sequences) &&
                       cJSON_AddNumberToObject(cal, "tokens", (double)tokens) &&
                       cJSON_AddNumberToObject(cal, "seq_len", c->S) &&
                       cJSON_AddNumberToObject(cal, "offset_std", d->offset_std)));
    char *text = ok && !st ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    free(y);
    if (st) return st;
    if (!text) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tdacl_model_calibrate: out of memory writing %s", path);
    tdacl_atomic_file af;
    FILE *f = tdacl__atomic_open(&af, path, 0644);
    int e = f ? 0 : errno;
    if (f) e = tdacl__atomic_commit(&af, fputs(text, f) >= 0 && fputc('\n', f) != EOF);
    free(text);
    return e ? tdacl__fail(ctx, TDACL_ERR_IO, "tdacl_model_calibrate: cannot write %s: %s", path, strerror(e))
             : TDACL_SUCCESS;
}

static tdacl_status check_desc(const tdacl_model *m, const tdacl_calibrate_desc *d, int64_t count, const char *path,
                               const int32_t *tokens)
{
    const char *call = "tdacl_model_calibrate";
    if (!d || !tokens || !path)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call, !d ? "desc" : !tokens ? "tokens" : "path");
    if (m->kind != TDACL_ATTN_SOFTMAX && m->kind != TDACL_ATTN_TOPK_THETA)
        return tdacl__fail(m->ctx, TDACL_ERR_UNSUPPORTED, "%s: the model runs %s attention; thresholds are calibrated on "
                           "softmax (or topk_theta) models", call, tdacl__kind_name(m->kind));
    if (count < 2) return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: %lld calibration tokens (at least 2)", call,
                                      (long long)count);
    if (d->seq_len < 0 || d->seq_len > m->info.max_context)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.seq_len %d is outside 0..%d (the context)", call,
                           d->seq_len, m->info.max_context);
    if (!(d->offset_std > -1e6f && d->offset_std < 1e6f))
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.offset_std must be finite (got %g)", call,
                           d->offset_std);
    if (d->theta_post != 0 && d->theta_post != 1)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.theta_post must be 0 or 1", call);
    if (d->fit_degree < -1 || d->fit_degree > MAX_FIT_DEGREE)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.fit_degree %d is outside -1..%d", call,
                           d->fit_degree, MAX_FIT_DEGREE);
    for (int l = 0; l < m->info.n_layer; l++) {
        const int k = d->k_per_layer ? d->k_per_layer[l] : d->k;
        if (k < 1) return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: k = %d for layer %d (at least 1)", call, k, l);
    }
    return TDACL_SUCCESS;
}

tdacl_status tdacl_model_calibrate(tdacl_model *m, const tdacl_calibrate_desc *d, const int32_t *tokens, int64_t count,
                                   const char *path)
{
    if (!m) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_model_calibrate: model is NULL");
    tdacl_status st = check_desc(m, d, count, path, tokens);
    if (st) return st;
    const int L = m->info.n_layer, H = m->H, S = d->seq_len ? d->seq_len : m->info.max_context;
    calib c;
    memset(&c, 0, sizeof c);
    c.desc = d, c.L = L, c.H = H, c.S = S, c.d = m->d, c.C = m->C, c.ld = m->kqkv * m->C;
    const size_t cells = (size_t)L * H * S;
    c.k = malloc((size_t)L * sizeof *c.k);
    c.sum = calloc(cells, sizeof *c.sum), c.sq = calloc(cells, sizeof *c.sq), c.eta = calloc(cells, sizeof *c.eta);
    c.count = calloc(cells, sizeof *c.count);
    c.host_qkv = malloc((size_t)S * c.ld * sizeof *c.host_qkv);
    c.table = malloc((size_t)H * S * sizeof *c.table);
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    /* one thread a head at most, and at most 64 (hook's arrays) */
    long nthreads = cores < H ? cores : H;
    c.nthreads = nthreads < 1 ? 1 : nthreads > 64 ? 64 : (int)nthreads;
    c.scratch = malloc((size_t)2 * c.nthreads * S * sizeof *c.scratch);
    if (!c.k || !c.sum || !c.sq || !c.eta || !c.count || !c.host_qkv || !c.table || !c.scratch)
        st = tdacl__fail(m->ctx, TDACL_ERR_OUT_OF_MEMORY, "tdacl_model_calibrate: out of memory for %d x %d x %d rows", L, H, S);
    for (int l = 0; !st && l < L; l++) c.k[l] = d->k_per_layer ? d->k_per_layer[l] : d->k;
    int64_t shape[2] = {H, S};
    if (!st) st = tdacl_tensor_create(m->ctx, TDACL_F32, 2, shape, &c.dev_table);

    /* run as Top-theta without compensation, each layer's table set by the hook */
    const tdacl_attention_kind kind = m->kind;
    const int post = m->theta_post, vmc = m->vmc;
    const tdacl_sdc sdc = m->sdc;
    tdacl_tensor **saved = calloc((size_t)L * 3, sizeof *saved);
    if (!st && !saved) st = tdacl__fail(m->ctx, TDACL_ERR_OUT_OF_MEMORY, "tdacl_model_calibrate: out of memory");
    if (!st) {
        for (int l = 0; l < L; l++) {
            layer *ly = &m->layers[l];
            saved[3 * l] = ly->thresholds, saved[3 * l + 1] = ly->log_mass, saved[3 * l + 2] = ly->v_sum;
            ly->thresholds = c.dev_table, ly->log_mass = NULL, ly->v_sum = NULL;
        }
        m->kind = TDACL_ATTN_TOPK_THETA, m->theta_post = d->theta_post, m->vmc = 0, m->sdc = TDACL_SDC_NONE;
        m->hook = hook, m->hook_user = &c;
    }
    int64_t sequences = 0, done = 0;
    while (!st && done < count) {
        int len = count - done < S ? (int)(count - done) : S;
        if (len >= 2) st = tdacl__model_prefill(m, 1, len, tokens + done, 1); /* a 1-token tail has no row to calibrate */
        done += len, sequences += len >= 2;
        if (!st && d->progress) d->progress(d->progress_user, done, count);
    }
    if (saved) {
        for (int l = 0; l < L; l++) {
            layer *ly = &m->layers[l];
            ly->thresholds = saved[3 * l], ly->log_mass = saved[3 * l + 1], ly->v_sum = saved[3 * l + 2];
        }
        m->kind = kind, m->theta_post = post, m->vmc = vmc, m->sdc = sdc;
        m->hook = NULL, m->hook_user = NULL;
    }
    if (!st) st = tdacl_finish(m->ctx);
    if (!st) st = write_file(m->ctx, &c, path, sequences, done);
    tdacl_tensor_destroy(c.dev_table);
    free(saved), free(c.k), free(c.sum), free(c.sq), free(c.eta), free(c.count), free(c.host_qkv), free(c.table);
    free(c.scratch);
    return st;
}
