/* The tuning database: a line-per-entry text format that diffs well, parsed leniently
 * (bad lines are reported with their number and skipped), and the lookup that walks
 * user database -> shipped database -> class default -> generic ladder.
 *
 * Line format:
 *   KERNEL key=value ... : PARAM=int ...   # optional comment
 * keys: device="name" vendor="name" driver="version" class=arch kind=tra dtype=f32 d=64
 *       dv=64 t=short|long bh=few|many weights=lazy|eager tq=N   (an absent key matches anything) */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <clblast_c.h>
#include <cjson/cJSON.h>

#include "base/fileio.h"
#include "base/kinds.h"
#include "runtime/tuning.h"

int tdacl__problem_key_dtype(const tdacl_problem *p)
{
    return p->tile_bytes == 4 && p->dtype == TDACL_F32 ? TDACL_KEY_TF32 : (int)p->dtype;
}

const char *tdacl__t_bucket(int64_t t) { return t <= 1024 ? "short" : "long"; }

const char *tdacl__bh_bucket(int64_t bh) { return bh <= TDACL_BH_FEW ? "few" : "many"; }

const char *tdacl__tuned_source_name(tdacl_tuned_source s)
{
    static const char *n[] = {"user", "shipped", "class", "generic"};
    return s <= TDACL_TUNED_GENERIC ? n[s] : "?";
}

int tdacl__param_index(const tdacl_kernel_space *ks, const char *name)
{
    for (int i = 0; i < ks->nparams; i++)
        if (!strcmp(ks->params[i].name, name)) return i;
    return -1;
}

int tdacl__param(const tdacl_kernel_space *ks, const tdacl_param_values *v, const char *name)
{
    int i = tdacl__param_index(ks, name);
    return i < 0 ? -1 : v->v[i];
}

int tdacl__params_parse(const tdacl_kernel_space *ks, const char *text, tdacl_param_values *out, char *why, size_t n)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < ks->nparams; i++) out->v[i] = ks->params[i].def;
    for (const char *p = text ? text : ""; *p;) {
        while (*p == ' ') p++;
        if (!*p) break;
        char name[32];
        size_t len = strcspn(p, "= ");
        if (len == 0 || len >= sizeof name || p[len] != '=') {
            snprintf(why, n, "kernel %s: malformed assignment at '%.20s'", ks->kernel, p);
            return -1;
        }
        memcpy(name, p, len);
        name[len] = 0;
        int k = tdacl__param_index(ks, name);
        char *end;
        long val = strtol(p + len + 1, &end, 10);
        if (k < 0 || end == p + len + 1 || (*end && *end != ' ') || val < -1000000 || val > 1000000) {
            snprintf(why, n, k < 0 ? "kernel %s has no parameter %s" : "kernel %s: %s needs an integer value",
                     ks->kernel, name);
            return -1;
        }
        out->v[k] = (int)val;
        p = end;
    }
    return 0;
}

int tdacl__params_check(const tdacl_kernel_space *ks, const tdacl_device_info *dev, const tdacl_problem *p,
                        const tdacl_param_values *v, char *why, size_t n)
{
    if (ks->check(ks, dev, p, v, why, n)) return 1;
    size_t lb = ks->local_bytes(ks, p, v);
    const int room = ks->local_exact ? 0 : TDACL_LOCAL_HEADROOM;
    if (lb + (size_t)room > dev->local_mem_bytes) {
        snprintf(why, n, "needs %zu bytes of local memory (+%d for the driver's alignment), the device has %llu", lb, room,
                 (unsigned long long)dev->local_mem_bytes);
        return 1;
    }
    return 0;
}

void tdacl__params_options(const tdacl_kernel_space *ks, const tdacl_param_values *v, tdacl_strbuf *sb)
{
    for (int i = 0; i < ks->nparams; i++)
        if (ks->params[i].is_macro) tdacl__sb_printf(sb, " -D%s=%d", ks->params[i].name, v->v[i]);
}

void tdacl__params_text(const tdacl_kernel_space *ks, const tdacl_param_values *v, char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < ks->nparams && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s=%d", i ? " " : "", ks->params[i].name, v->v[i]);
}

/* ---- parsing ---- */

/* Next token: a word, key=value (value maybe "quoted"), ':' or end.  Returns 0 at end,
 * -1 on an unterminated quote. */
static int next_token(const char **pp, char *key, size_t kn, char *val, size_t vn)
{
    const char *p = *pp;
    while (*p == ' ' || *p == '\t' || *p == '\r') p++;
    if (!*p || *p == '#' || *p == '\n') return 0;
    key[0] = val[0] = 0;
    if (*p == ':') {
        snprintf(key, kn, ":");
        *pp = p + 1;
        return 1;
    }
    size_t k = 0;
    while (*p && !isspace((unsigned char)*p) && *p != '=' && *p != '#' && *p != ':') {
        if (k + 1 < kn) key[k++] = *p;
        p++;
    }
    key[k] = 0;
    if (*p == '=') {
        p++;
        size_t v = 0;
        if (*p == '"') {
            p++;
            while (*p && *p != '"' && *p != '\n') {
                if (v + 1 < vn) val[v++] = *p;
                p++;
            }
            if (*p != '"') return -1;
            p++;
        } else {
            while (*p && !isspace((unsigned char)*p) && *p != '#') {
                if (v + 1 < vn) val[v++] = *p;
                p++;
            }
        }
        val[v] = 0;
    }
    *pp = p;
    return 1;
}

#define PARAM_LIMIT 1000000

/* 0 ok; -1 not an integer; -2 an integer outside +-PARAM_LIMIT */
static int parse_int(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || (errno && errno != ERANGE)) return -1;
    if (errno == ERANGE || v < -PARAM_LIMIT || v > PARAM_LIMIT) return -2;
    *out = (int)v;
    return 0;
}

void tdacl__tdb_entry_init(tdacl_tdb_entry *e)
{
    memset(e, 0, sizeof *e);
    e->kind = e->dtype = e->adtype = e->lazy = -1;
}

static tdacl_status parse_line(const char *line, tdacl_tdb_entry *e, char *why, size_t wn)
{
    tdacl__tdb_entry_init(e);
    const char *p = line;
    char key[64], val[160];
    int r = next_token(&p, key, sizeof key, val, sizeof val);
    if (r == 0) return TDACL_SUCCESS; /* blank or comment: kernel stays empty */
    if (r < 0 || val[0] || !strcmp(key, ":")) {
        snprintf(why, wn, "expected a kernel name first");
        return TDACL_ERR_FORMAT;
    }
    snprintf(e->kernel, sizeof e->kernel, "%s", key);
    int in_params = 0;
    while ((r = next_token(&p, key, sizeof key, val, sizeof val)) > 0) {
        if (!strcmp(key, ":")) {
            if (in_params) { snprintf(why, wn, "second ':'"); return TDACL_ERR_FORMAT; }
            in_params = 1;
            continue;
        }
        if (in_params) {
            if (e->nparams >= TDACL_MAX_PARAMS) { snprintf(why, wn, "too many parameters"); return TDACL_ERR_FORMAT; }
            if (strlen(key) >= sizeof e->pname[0] || !key[0]) { snprintf(why, wn, "bad parameter name '%s'", key); return TDACL_ERR_FORMAT; }
            for (int i = 0; i < e->nparams; i++)
                if (!strcmp(e->pname[i], key)) {
                    snprintf(why, wn, "parameter %s is given twice", key);
                    return TDACL_ERR_FORMAT;
                }
            int pr = parse_int(val, &e->pvalue[e->nparams]);
            if (pr == -1) {
                snprintf(why, wn, "parameter %s has a non-integer value '%s'", key, val);
                return TDACL_ERR_FORMAT;
            }
            if (pr == -2) {
                snprintf(why, wn, "parameter %s=%s is outside -%d..%d", key, val, PARAM_LIMIT, PARAM_LIMIT);
                return TDACL_ERR_FORMAT;
            }
            snprintf(e->pname[e->nparams++], sizeof e->pname[0], "%s", key);
            continue;
        }
        if (!strcmp(key, "device")) snprintf(e->device, sizeof e->device, "%s", val);
        else if (!strcmp(key, "vendor")) snprintf(e->vendor, sizeof e->vendor, "%s", val);
        else if (!strcmp(key, "driver")) snprintf(e->driver, sizeof e->driver, "%s", val);
        else if (!strcmp(key, "class")) snprintf(e->arch, sizeof e->arch, "%s", val);
        else if (!strcmp(key, "kind")) {
            if ((e->kind = tdacl__kind_from_name(val)) < -1) { snprintf(why, wn, "unknown kind '%s'", val); return TDACL_ERR_FORMAT; }
        } else if (!strcmp(key, "dtype")) {
            if (!strcmp(val, "tf32")) e->dtype = TDACL_KEY_TF32;
            else if ((e->dtype = tdacl__dtype_from_name(val)) < -1) { snprintf(why, wn, "unknown dtype '%s'", val); return TDACL_ERR_FORMAT; }
        } else if (!strcmp(key, "adtype")) {
            if ((e->adtype = tdacl__dtype_from_name(val)) < 0) { snprintf(why, wn, "unknown adtype '%s'", val); return TDACL_ERR_FORMAT; }
        } else if (!strcmp(key, "d") || !strcmp(key, "dv") || !strcmp(key, "tq")) {
            int x;
            if (parse_int(val, &x) || x <= 0 || x > 4096) { snprintf(why, wn, "%s=%s is not a positive integer", key, val); return TDACL_ERR_FORMAT; }
            if (!strcmp(key, "d")) e->d = x;
            else if (!strcmp(key, "dv")) e->dv = x;
            else e->tq = x;
        } else if (!strcmp(key, "t")) {
            if (strcmp(val, "short") && strcmp(val, "long")) { snprintf(why, wn, "t=%s is not short or long", val); return TDACL_ERR_FORMAT; }
            snprintf(e->tbucket, sizeof e->tbucket, "%s", val);
        } else if (!strcmp(key, "bh")) {
            if (strcmp(val, "few") && strcmp(val, "many")) { snprintf(why, wn, "bh=%s is not few or many", val); return TDACL_ERR_FORMAT; }
            snprintf(e->bhbucket, sizeof e->bhbucket, "%s", val);
        } else if (!strcmp(key, "weights")) {
            if (strcmp(val, "lazy") && strcmp(val, "eager")) { snprintf(why, wn, "weights=%s is not lazy or eager", val); return TDACL_ERR_FORMAT; }
            e->lazy = !strcmp(val, "lazy");
        } else {
            snprintf(why, wn, "unknown key '%s'", key);
            return TDACL_ERR_FORMAT;
        }
    }
    if (r < 0) { snprintf(why, wn, "unterminated quote"); return TDACL_ERR_FORMAT; }
    if (!in_params || e->nparams == 0) { snprintf(why, wn, "no ': PARAM=value' part"); return TDACL_ERR_FORMAT; }
    const char *hash = strchr(p, '#');
    if (hash) {
        hash++;
        while (*hash == ' ') hash++;
        snprintf(e->comment, sizeof e->comment, "%.*s", (int)strcspn(hash, "\r\n"), hash);
    }
    return TDACL_SUCCESS;
}

tdacl_status tdacl__tdb_parse(const tdacl_context *ctx, const char *text, size_t len, const char *path, tdacl_tdb *db)
{
    memset(db, 0, sizeof *db);
    snprintf(db->path, sizeof db->path, "%s", path);
    size_t pos = 0;
    int lineno = 0, warned = 0, unwarned = 0;
    char *line = NULL;
    size_t line_cap = 0;
#define TDB_WARN(...)                                                                  \
    do {                                                                               \
        if (warned < TDACL_TDB_MAX_WARNINGS) tdacl__log(ctx, TDACL_LOG_WARN, __VA_ARGS__), warned++; \
        else unwarned++;                                                               \
    } while (0)
    while (pos < len) {
        if (db->count >= TDACL_TDB_MAX_ENTRIES) {
            tdacl__log(ctx, TDACL_LOG_WARN, "tuning database %s: more than %d entries; the rest from line %d on is ignored",
                       path, TDACL_TDB_MAX_ENTRIES, lineno + 1);
            break;
        }
        size_t end = pos;
        while (end < len && text[end] != '\n') end++;
        lineno++;
        size_t n = end - pos;
        if (n + 1 > line_cap) {
            char *grown = realloc(line, n + 1);
            if (!grown) { free(line); tdacl__tdb_free(db); return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tuning database: out of memory"); }
            line = grown, line_cap = n + 1;
        }
        memcpy(line, text + pos, n);
        line[n] = 0;
        pos = end + 1;
        if (memchr(line, 0, n)) {
            TDB_WARN("tuning database %s:%d: NUL byte; line ignored", path, lineno);
            continue;
        }
        tdacl_tdb_entry e;
        char why[160] = "";
        if (parse_line(line, &e, why, sizeof why)) {
            TDB_WARN("tuning database %s:%d: %s; line ignored", path, lineno, why);
            continue;
        }
        if (!e.kernel[0]) continue;
        e.line = lineno;
        if (db->count == db->cap) {
            int cap = db->cap ? 2 * db->cap : 32;
            tdacl_tdb_entry *grown = realloc(db->entries, (size_t)cap * sizeof *grown);
            if (!grown) { free(line); tdacl__tdb_free(db); return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tuning database: out of memory"); }
            db->entries = grown, db->cap = cap;
        }
        db->entries[db->count++] = e;
    }
#undef TDB_WARN
    if (unwarned)
        tdacl__log(ctx, TDACL_LOG_WARN, "tuning database %s: %d more malformed lines ignored", path, unwarned);
    free(line);
    return TDACL_SUCCESS;
}

void tdacl__tdb_free(tdacl_tdb *db)
{
    free(db->entries);
    db->entries = NULL;
    db->count = db->cap = 0;
}

void tdacl__tdb_format(const tdacl_tdb_entry *e, char *buf, size_t n)
{
    size_t off = (size_t)snprintf(buf, n, "%s", e->kernel);
#define ADD(...) do { if (off < n) off += (size_t)snprintf(buf + off, n - off, __VA_ARGS__); } while (0)
    if (e->device[0]) ADD(" device=\"%s\"", e->device);
    if (e->vendor[0]) ADD(" vendor=\"%s\"", e->vendor);
    if (e->driver[0]) ADD(" driver=\"%s\"", e->driver);
    if (e->arch[0]) ADD(" class=%s", e->arch);
    if (e->kind >= 0) ADD(" kind=%s", tdacl__kind_name(e->kind));
    if (e->dtype >= 0) ADD(" dtype=%s", e->dtype == TDACL_KEY_TF32 ? "tf32" : tdacl_dtype_name((tdacl_dtype)e->dtype));
    if (e->adtype >= 0) ADD(" adtype=%s", tdacl_dtype_name((tdacl_dtype)e->adtype));
    if (e->d) ADD(" d=%d", e->d);
    if (e->dv) ADD(" dv=%d", e->dv);
    if (e->tbucket[0]) ADD(" t=%s", e->tbucket);
    if (e->bhbucket[0]) ADD(" bh=%s", e->bhbucket);
    if (e->lazy >= 0) ADD(" weights=%s", e->lazy ? "lazy" : "eager");
    if (e->tq) ADD(" tq=%d", e->tq);
    ADD(" :");
    for (int i = 0; i < e->nparams; i++) ADD(" %s=%d", e->pname[i], e->pvalue[i]);
    if (e->comment[0]) ADD("  # %s", e->comment);
#undef ADD
}

static int same_keys(const tdacl_tdb_entry *a, const tdacl_tdb_entry *b)
{
    return !strcmp(a->kernel, b->kernel) && !strcmp(a->device, b->device) &&
           !strcmp(a->vendor, b->vendor) && !strcmp(a->driver, b->driver) &&
           !strcmp(a->arch, b->arch) && a->kind == b->kind && a->dtype == b->dtype && a->adtype == b->adtype &&
           a->d == b->d && a->dv == b->dv && !strcmp(a->tbucket, b->tbucket) && !strcmp(a->bhbucket, b->bhbucket) &&
           a->lazy == b->lazy && a->tq == b->tq;
}

static char *read_file(const char *path, size_t *len) { return tdacl__read_regular(path, (size_t)64 << 20, len); }

void tdacl__tdb_user_path(const char *override, char *buf, size_t n)
{
    const char *e = override && *override ? override : getenv("TDACL_TUNING_FILE");
    if (e && *e) { snprintf(buf, n, "%s", e); return; }
    const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) snprintf(buf, n, "%s/tdacl/tuning.tdb", xdg);
    else if (home && *home) snprintf(buf, n, "%s/.config/tdacl/tuning.tdb", home);
    else buf[0] = 0;
}

tdacl_status tdacl__tdb_upsert_file(tdacl_context *ctx, const char *path, const tdacl_tdb_entry *e)
{
    size_t len = 0;
    char *old = read_file(path, &len);
    /* make the directory */
    char dir[TDACL_PATH_LIMIT];
    if (strlen(path) >= sizeof dir) {
        free(old);
        return tdacl__fail(ctx, TDACL_ERR_IO, "tuning database path is %zu characters; at most %zu", strlen(path),
                           sizeof dir - 1);
    }
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        tdacl__mkdir_p(dir, 0755); /* a failure shows when the file is opened */
    }
    tdacl_atomic_file af;
    FILE *f = tdacl__atomic_open(&af, path, 0644);
    if (!f) { free(old); return tdacl__fail(ctx, TDACL_ERR_IO, "cannot write tuning database %s: %s", path, strerror(errno)); }
    int replaced = 0;
    char line[1024];
    if (old) {
        const char *p = old;
        while (*p) {
            size_t n = strcspn(p, "\n");
            char buf[1024];
            snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf - 1 ? n : sizeof buf - 1), p);
            tdacl_tdb_entry cur;
            char why[160];
            if (!parse_line(buf, &cur, why, sizeof why) && cur.kernel[0] && same_keys(&cur, e)) {
                if (!replaced) { tdacl__tdb_format(e, line, sizeof line); fprintf(f, "%s\n", line); }
                replaced = 1;
            } else {
                fprintf(f, "%.*s\n", (int)n, p);
            }
            p += n;
            if (*p == '\n') p++;
        }
    } else {
        fprintf(f, "# tdacl tuning database: KERNEL keys : PARAMS  (written by `tdacl tune`)\n");
    }
    if (!replaced) { tdacl__tdb_format(e, line, sizeof line); fprintf(f, "%s\n", line); }
    free(old);
    int err = tdacl__atomic_commit(&af, !ferror(f));
    if (err) return tdacl__fail(ctx, TDACL_ERR_IO, "cannot write tuning database %s: %s", path, strerror(err));
    return TDACL_SUCCESS;
}

/* ---- context ---- */

tdacl_status tdacl__tuning_open(tdacl_context *ctx, const char *file)
{
    struct tdacl_tuning_db *db = calloc(1, sizeof *db);
    if (!db) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tuning database: out of memory");
    ctx->tuning = db;
    if (!ctx->use_tuning_db) return TDACL_SUCCESS;
    const tdacl_embedded_source *s = tdacl__find_source("shipped.tdb");
    if (s) tdacl__tdb_parse(ctx, s->text, s->size, "(shipped)", &db->shipped);
    char path[1024];
    tdacl__tdb_user_path(file, path, sizeof path);
    /* a file the user named (desc.tuning_file or TDACL_TUNING_FILE) must exist; the default
     * path may well not */
    const char *env = getenv("TDACL_TUNING_FILE");
    int named = (file && *file) || (env && *env);
    size_t len;
    if (strlen(path) >= sizeof db->user.path) {
        tdacl__log(ctx, TDACL_LOG_WARN, "tuning database path is %zu characters (at most %zu); using defaults",
                   strlen(path), sizeof db->user.path - 1);
        return TDACL_SUCCESS;
    }
    errno = 0;
    char *text = path[0] ? tdacl__read_regular(path, TDACL_TDB_MAX_BYTES, &len) : NULL;
    if (text) {
        tdacl__tdb_parse(ctx, text, len, path, &db->user);
        tdacl__log(ctx, TDACL_LOG_DEBUG, "tuning database %s: %d entries", path, db->user.count);
        free(text);
    } else if (errno == EFBIG) {
        tdacl__log(ctx, TDACL_LOG_WARN, "tuning database %s is larger than %zu bytes; ignored, using defaults", path,
                   TDACL_TDB_MAX_BYTES);
    } else if (named || (errno && errno != ENOENT)) {
        tdacl__log(ctx, TDACL_LOG_WARN, "tuning database %s cannot be read (%s); using defaults", path,
                   tdacl__file_error(errno));
    } else {
        snprintf(db->user.path, sizeof db->user.path, "%s", path);
    }
    return TDACL_SUCCESS;
}

void tdacl__tuning_close(tdacl_context *ctx)
{
    if (!ctx->tuning) return;
    tdacl__tdb_free(&ctx->tuning->user);
    tdacl__tdb_free(&ctx->tuning->shipped);
    free(ctx->tuning);
    ctx->tuning = NULL;
}

/* ---- lookup ---- */

/* Score of an entry for this device and problem; -1 when it does not apply. */
static int entry_score(const tdacl_tdb_entry *e, const tdacl_device_info *dev, const char *kernel,
                       const tdacl_problem *p)
{
    if (strcmp(e->kernel, kernel)) return -1;
    int score = 0;
    if (e->device[0]) {
        if (strcmp(e->device, dev->name)) return -1;
        score += 8;
    }
    if (e->vendor[0]) {
        if (strcmp(e->vendor, dev->vendor)) return -1;
        score += 1;
    }
    if (e->driver[0] && !strcmp(e->driver, dev->driver_version)) score += 4;
    if (e->arch[0]) {
        if (strcmp(e->arch, dev->arch)) return -1;
        score += 2;
    }
    if (!e->device[0] && !e->arch[0]) return -1; /* an entry must name a device or a class */
    if (e->kind >= 0) { if (e->kind != p->kind) return -1; score += 1; }
    if (e->dtype >= 0) { if (e->dtype != tdacl__problem_key_dtype(p)) return -1; score += 1; }
    if (e->adtype >= 0) { if (e->adtype != p->adtype) return -1; score += 1; }
    if (e->d) { if (e->d != p->d) return -1; score += 1; }
    if (e->dv) { if (e->dv != p->dv) return -1; score += 1; }
    if (e->tbucket[0]) { if (strcmp(e->tbucket, tdacl__t_bucket(p->t))) return -1; score += 1; }
    if (e->bhbucket[0]) { if (!p->bh || strcmp(e->bhbucket, tdacl__bh_bucket(p->bh))) return -1; score += 1; }
    if (e->lazy >= 0) { if (e->lazy != p->lazy) return -1; score += 1; }
    if (e->tq) { if (e->tq != p->tq) return -1; score += 1; }
    return score;
}

/* Fills values from an entry; every parameter must be named and known. */
static int entry_values(const tdacl_kernel_space *ks, const tdacl_tdb_entry *e, tdacl_param_values *out,
                        char *why, size_t n)
{
    int seen[TDACL_MAX_PARAMS] = {0};
    for (int i = 0; i < e->nparams; i++) {
        int k = tdacl__param_index(ks, e->pname[i]);
        if (k < 0) { snprintf(why, n, "unknown parameter %s for kernel %s", e->pname[i], ks->kernel); return -1; }
        out->v[k] = e->pvalue[i];
        seen[k] = 1;
    }
    for (int k = 0; k < ks->nparams; k++)
        if (!seen[k]) { snprintf(why, n, "parameter %s missing", ks->params[k].name); return -1; }
    return 0;
}

typedef struct scored { int score, index; } scored;

static int by_score(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->score != y->score) return y->score - x->score; /* best first */
    return x->index - y->index;                           /* then the earlier line */
}

/* The best applicable entry whose values pass the kernel's constraints; rejected ones are
 * logged (once per distinct problem: tdacl__tuned remembers the outcome). */
static int from_db(tdacl_context *ctx, const tdacl_kernel_space *ks, const tdacl_tdb *db,
                   const tdacl_problem *p, tdacl_tuned *out)
{
    if (db->count == 0) return 0;
    scored *cand = malloc((size_t)db->count * sizeof *cand);
    if (!cand) return 0; /* out of memory: the defaults still apply */
    int n = 0;
    for (int i = 0; i < db->count; i++) {
        int sc = entry_score(&db->entries[i], &ctx->info, ks->kernel, p);
        if (sc >= 0) cand[n].score = sc, cand[n++].index = i;
    }
    qsort(cand, (size_t)n, sizeof *cand, by_score);
    int found = 0, rejected = 0;
    for (int c = 0; c < n && !found; c++) {
        const tdacl_tdb_entry *e = &db->entries[cand[c].index];
        char why[200];
        tdacl_param_values v = {{0}};
        if (entry_values(ks, e, &v, why, sizeof why) ||
            tdacl__params_check(ks, &ctx->info, p, &v, why, sizeof why)) {
            if (rejected++ < TDACL_TDB_MAX_WARNINGS)
                tdacl__log(ctx, TDACL_LOG_WARN, "tuning database %s:%d: %s; falling back", db->path, e->line, why);
            continue;
        }
        out->values = v;
        snprintf(out->origin, sizeof out->origin, "%s:%d", db->path, e->line);
        found = 1;
    }
    if (rejected > TDACL_TDB_MAX_WARNINGS)
        tdacl__log(ctx, TDACL_LOG_WARN, "tuning database %s: %d more entries for kernel %s rejected", db->path,
                   rejected - TDACL_TDB_MAX_WARNINGS, ks->kernel);
    free(cand);
    return found;
}

static int same_problem(const tdacl_problem *a, const tdacl_problem *b)
{
    return a->kind == b->kind && a->dtype == b->dtype && a->adtype == b->adtype && a->d == b->d && a->dv == b->dv &&
           !strcmp(tdacl__t_bucket(a->t), tdacl__t_bucket(b->t)) && !strcmp(tdacl__bh_bucket(a->bh), tdacl__bh_bucket(b->bh)) &&
           !a->bh == !b->bh && a->lazy == b->lazy && a->tq == b->tq && a->native == b->native &&
           a->mma_regs == b->mma_regs && a->wide16 == b->wide16 && a->tile_bytes == b->tile_bytes;
}

static tdacl_status tuned_uncached(tdacl_context *ctx, const tdacl_kernel_space *ks, const tdacl_problem *p,
                                   tdacl_tuned *out);

tdacl_status tdacl__tuned(tdacl_context *ctx, const tdacl_kernel_space *ks, const tdacl_problem *p, tdacl_tuned *out)
{
    const char *kernel = ks->kernel;
    struct tdacl_tuning_db *db = ctx->tuning;
    if (db)
        for (int i = 0; i < db->nmemo; i++)
            if (!strcmp(db->memo[i].kernel, kernel) && same_problem(&db->memo[i].problem, p)) {
                *out = db->memo[i].tuned;
                return TDACL_SUCCESS;
            }
    tdacl_status st = tuned_uncached(ctx, ks, p, out);
    if (!st && db) { /* a small ring: a model uses a handful of problems */
        tdacl_tuned_memo *m = &db->memo[db->next_memo];
        db->next_memo = (db->next_memo + 1) % TDACL_TUNED_MEMO;
        if (db->nmemo < TDACL_TUNED_MEMO) db->nmemo++;
        snprintf(m->kernel, sizeof m->kernel, "%s", kernel);
        m->problem = *p;
        m->tuned = *out;
    }
    return st;
}

static tdacl_status tuned_uncached(tdacl_context *ctx, const tdacl_kernel_space *ks, const tdacl_problem *p,
                                   tdacl_tuned *out)
{
    const char *kernel = ks->kernel;
    memset(out, 0, sizeof *out);
    if (ctx->tuning && ctx->use_tuning_db) {
        if (from_db(ctx, ks, &ctx->tuning->user, p, out)) { out->source = TDACL_TUNED_USER; return TDACL_SUCCESS; }
        if (from_db(ctx, ks, &ctx->tuning->shipped, p, out)) { out->source = TDACL_TUNED_SHIPPED; return TDACL_SUCCESS; }
    }
    char why[200] = "";
    tdacl_param_values v;
    for (const tdacl_class_default *c = ks->class_defaults; c && c->arch_prefix; c++) {
        if (strncmp(ctx->info.arch, c->arch_prefix, strlen(c->arch_prefix))) continue;
        if (c->kind >= 0 && c->kind != p->kind) continue;
        if (c->dmax && (p->d > c->dmax || p->dv > c->dmax)) continue;
        if (tdacl__params_parse(ks, c->values, &v, why, sizeof why) ||
            tdacl__params_check(ks, &ctx->info, p, &v, why, sizeof why))
            continue;
        out->values = v;
        out->source = TDACL_TUNED_CLASS;
        snprintf(out->origin, sizeof out->origin, "class default %s%s", c->arch_prefix[0] ? c->arch_prefix : "(any device)",
                 c->unmeasured ? " (compiled offline, not yet run on such hardware)" : "");
        return TDACL_SUCCESS;
    }
    char whys[600] = ""; /* each ladder rung's reason: the last alone can mislead */
    for (int i = 0; i < ks->nladder; i++) {
        if (tdacl__params_parse(ks, ks->ladder[i], &v, why, sizeof why) ||
            tdacl__params_check(ks, &ctx->info, p, &v, why, sizeof why)) {
            const size_t used = strlen(whys);
            snprintf(whys + used, sizeof whys - used, "%s%s: %s", used ? "; " : "", ks->ladder[i], why);
            continue;
        }
        out->values = v;
        out->source = TDACL_TUNED_GENERIC;
        snprintf(out->origin, sizeof out->origin, "generic ladder #%d", i);
        return TDACL_SUCCESS;
    }
    return tdacl__fail(ctx, TDACL_ERR_UNSUPPORTED,
                       "kernel %s: no parameter set fits this device (%s) for d=%d dv=%d (%s)",
                       kernel, ctx->info.name, p->d, p->dv, ks->nladder ? whys : why);
}

/* ---- CLBlast overrides ----
 * Entries named clblast_<kernel> (e.g. clblast_xgemm) hold CLBlast's own kernel parameters,
 * imported from its tuners; the best matching one per kernel and precision is handed to
 * CLBlastOverrideParameters when a context is created.  CLBlast validates the names and
 * values; a refusal is logged with the line and CLBlast keeps its own database. */

static const struct { const char *entry, *kernel; } clblast_kernels[] = {
    {"clblast_xgemm", "Xgemm"}, {"clblast_xgemm_direct", "XgemmDirect"}, {"clblast_xgemv", "Xgemv"},
    {"clblast_copy", "Copy"}, {"clblast_pad", "Pad"}, {"clblast_transpose", "Transpose"}, {"clblast_padtranspose", "Padtranspose"},
};

static int clblast_score(const tdacl_tdb_entry *e, const tdacl_device_info *dev)
{
    int score = 0;
    if (e->device[0]) {
        if (strcmp(e->device, dev->name)) return -1;
        score += 8;
    }
    if (e->driver[0] && !strcmp(e->driver, dev->driver_version)) score += 4;
    if (e->arch[0]) {
        if (strcmp(e->arch, dev->arch)) return -1;
        score += 2;
    }
    return e->device[0] || e->arch[0] ? score : -1;
}

void tdacl__clblast_overrides(tdacl_context *ctx)
{
    if (!ctx->tuning || !ctx->use_tuning_db) return;
    const tdacl_tdb *dbs[2] = {&ctx->tuning->user, &ctx->tuning->shipped};
    for (size_t k = 0; k < TDACL_ARRAY_LEN(clblast_kernels); k++)
        for (int prec = 0; prec < 2; prec++) {
            /* precision from the entry's dtype: f32 -> single (32), f16 -> half (16) */
            int want_dt = prec == 0 ? TDACL_F32 : TDACL_F16;
            const tdacl_tdb_entry *best = NULL;
            const char *where = NULL;
            int best_score = -1;
            for (int d = 0; d < 2 && !best; d++)
                for (int i = 0; i < dbs[d]->count; i++) {
                    const tdacl_tdb_entry *e = &dbs[d]->entries[i];
                    if (strcmp(e->kernel, clblast_kernels[k].entry) || (e->dtype >= 0 ? e->dtype : TDACL_F32) != want_dt)
                        continue;
                    int sc = clblast_score(e, &ctx->info);
                    if (sc > best_score) best_score = sc, best = e, where = dbs[d]->path;
                }
            if (!best) continue;
            const char *names[TDACL_MAX_PARAMS];
            size_t values[TDACL_MAX_PARAMS];
            for (int i = 0; i < best->nparams; i++) names[i] = best->pname[i], values[i] = (size_t)best->pvalue[i];
            CLBlastStatusCode rc = CLBlastOverrideParameters(ctx->device, clblast_kernels[k].kernel,
                                                             prec == 0 ? CLBlastPrecisionSingle : CLBlastPrecisionHalf,
                                                             (size_t)best->nparams, names, values);
            if (rc != CLBlastSuccess)
                tdacl__log(ctx, TDACL_LOG_WARN, "tuning database %s:%d: CLBlast refused the %s parameters (status %d); "
                           "CLBlast keeps its own", where, best->line, clblast_kernels[k].kernel, (int)rc);
            else
                tdacl__log(ctx, TDACL_LOG_INFO, "CLBlast %s parameters from %s:%d", clblast_kernels[k].kernel, where,
                           best->line);
        }
}

tdacl_status tdacl__clblast_import(tdacl_context *ctx, const char *json_path, const char *db_path)
{
    size_t len;
    char *text = read_file(json_path, &len);
    if (!text) return tdacl__fail(ctx, TDACL_ERR_IO, "cannot read %s: %s", json_path, strerror(errno));
    cJSON *root = cJSON_ParseWithLength(text, len);
    free(text);
    if (!root) return tdacl__fail(ctx, TDACL_ERR_FORMAT, "%s is not JSON (a CLBlast tuner result)", json_path);
    const cJSON *fam = cJSON_GetObjectItemCaseSensitive(root, "kernel_family");
    const cJSON *prec = cJSON_GetObjectItemCaseSensitive(root, "precision");
    const cJSON *best = cJSON_GetObjectItemCaseSensitive(root, "best_parameters");
    const cJSON *tm = cJSON_GetObjectItemCaseSensitive(root, "best_time");
    if (!cJSON_IsString(fam) || !cJSON_IsString(prec) || !cJSON_IsString(best)) {
        cJSON_Delete(root);
        return tdacl__fail(ctx, TDACL_ERR_FORMAT, "%s is not a CLBlast tuner result (kernel_family, precision, "
                           "best_parameters)", json_path);
    }
    /* CLBlast's precision codes: 16 half, 32 single; 64, 3232 and 6464 (double, complex) are
     * none of this library's dtypes */
    if (strcmp(prec->valuestring, "16") && strcmp(prec->valuestring, "32")) {
        tdacl_status st = tdacl__fail(ctx, TDACL_ERR_UNSUPPORTED, "%s: precision %.16s is not imported (16 half and "
                                      "32 single are)", json_path, prec->valuestring);
        cJSON_Delete(root);
        return st;
    }
    tdacl_tdb_entry e;
    tdacl__tdb_entry_init(&e);
    /* "xgemm_1" -> clblast_xgemm; "xgemm_direct_1" -> clblast_xgemm_direct */
    char family[40];
    snprintf(family, sizeof family, "%s", fam->valuestring);
    char *us = strrchr(family, '_');
    if (us && us[1] >= '0' && us[1] <= '9') *us = 0;
    snprintf(e.kernel, sizeof e.kernel, "clblast_%s", family);
    e.dtype = !strcmp(prec->valuestring, "16") ? TDACL_F16 : TDACL_F32;
    snprintf(e.device, sizeof e.device, "%s", ctx->info.name);
    snprintf(e.driver, sizeof e.driver, "%s", ctx->info.driver_version);
    snprintf(e.arch, sizeof e.arch, "%s", ctx->info.arch);
    const char *p = best->valuestring;
    while (*p && e.nparams < TDACL_MAX_PARAMS) {
        while (*p == ' ') p++;
        size_t n = strcspn(p, " ");
        char tok[64];
        snprintf(tok, sizeof tok, "%.*s", (int)(n < sizeof tok ? n : sizeof tok - 1), p);
        p += n;
        char *eq = strchr(tok, '=');
        if (!eq || !strcmp(tok, "") || !strncmp(tok, "PRECISION=", 10)) continue;
        *eq = 0;
        if (strlen(tok) >= sizeof e.pname[0] || parse_int(eq + 1, &e.pvalue[e.nparams])) continue;
        snprintf(e.pname[e.nparams++], sizeof e.pname[0], "%s", tok);
    }
    if (e.nparams >= TDACL_MAX_PARAMS && *p) {
        cJSON_Delete(root);
        return tdacl__fail(ctx, TDACL_ERR_FORMAT, "%s: more than %d parameters", json_path, TDACL_MAX_PARAMS);
    }
    snprintf(e.comment, sizeof e.comment, "CLBlast tuner %s: %s ms", fam->valuestring,
             cJSON_IsString(tm) ? tm->valuestring : "?");
    cJSON_Delete(root);
    if (!e.nparams) return tdacl__fail(ctx, TDACL_ERR_FORMAT, "%s: no parameters in best_parameters", json_path);
    return tdacl__tdb_upsert_file(ctx, db_path, &e);
}
