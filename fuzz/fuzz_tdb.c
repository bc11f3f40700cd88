/* libFuzzer entry for the tuning-database parser.  Every accepted entry names a kernel and
 * at least one parameter, stays within the entry cap, and survives a format -> parse round
 * trip unchanged (the writer and the reader agree). */
#include <string.h>

#include "runtime/tuning.h"

static void check(int ok)
{
    if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tdacl_tdb db;
    if (tdacl__tdb_parse(NULL, (const char *)data, size, "fuzz.tdb", &db)) return 0;
    check(db.count >= 0 && db.count <= TDACL_TDB_MAX_ENTRIES);
    for (int i = 0; i < db.count; i++) {
        const tdacl_tdb_entry *e = &db.entries[i];
        check(e->kernel[0] != 0 && e->nparams >= 1 && e->nparams <= TDACL_MAX_PARAMS);
        char line[4096];
        tdacl__tdb_format(e, line, sizeof line);
        if (strlen(line) + 1 >= sizeof line) continue; /* truncated: no round trip to check */
        tdacl_tdb again;
        check(tdacl__tdb_parse(NULL, line, strlen(line), "again.tdb", &again) == TDACL_SUCCESS);
        /* a quote inside a value cannot be written back; anything else must round-trip */
        if (!strchr(e->device, '"') && !strchr(e->vendor, '"') && !strchr(e->driver, '"')) {
            check(again.count == 1);
            const tdacl_tdb_entry *f = &again.entries[0];
            check(!strcmp(e->kernel, f->kernel) && e->nparams == f->nparams && e->kind == f->kind &&
                  e->dtype == f->dtype && e->d == f->d && e->dv == f->dv && e->tq == f->tq);
            for (int k = 0; k < e->nparams; k++)
                check(!strcmp(e->pname[k], f->pname[k]) && e->pvalue[k] == f->pvalue[k]);
        }
        tdacl__tdb_free(&again);
    }
    tdacl__tdb_free(&db);
    return 0;
}
