/* Top-theta threshold files (docs/spec.md section 4.7): the calibrated threshold of each
 * (layer, head, row id), as a table or a fitted function of the row id, and the optional
 * offline SDC table.  Read into per-layer [H, R] tables the attention kernels take. */
#ifndef TDACL_THRESHOLDS_H
#define TDACL_THRESHOLDS_H

#include "base/base.h"

#define TDACL_THRESHOLDS_FORMAT "tdacl-thresholds"
#define TDACL_THRESHOLDS_MAX_FIT 8 /* coefficients of a fitted function (degree 7) */

typedef struct tdacl_threshold_layer {
    int k;          /* the keys a row was calibrated to keep */
    int first_row;  /* rows below keep every key (-inf) */
    int rows;       /* R: columns of the tables (row id r reads column min(r, R - 1)) */
    float *theta;   /* [H, R] */
    float *log_mass; /* [H, R] offline SDC eta, or NULL */
} tdacl_threshold_layer;

typedef struct tdacl_thresholds {
    int n_layer, n_head;
    int post;       /* 1: thresholds compare softmax weights (post-softmax) */
    tdacl_threshold_layer *layers;
} tdacl_thresholds;

/* Parses text[0..len) (text[len] == 0), named `name` in messages, for a model of n_layer
 * layers and n_head heads; a fitted function is expanded to max_rows columns and a table
 * longer than max_rows is cut there.  Errors name the file and the key. */
tdacl_status tdacl__thresholds_parse(const char *text, size_t len, const char *name, int n_layer, int n_head,
                                     int max_rows, tdacl_thresholds *out);
/* The same for a file. */
tdacl_status tdacl__thresholds_read(const char *path, int n_layer, int n_head, int max_rows, tdacl_thresholds *out);
void tdacl__thresholds_free(tdacl_thresholds *t);

/* theta(r) of a fitted function: sum_i coef[i] * ln(r + 1)^i. */
double tdacl__threshold_fit_eval(const double *coef, int n, int64_t r);

#endif
