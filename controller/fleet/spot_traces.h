/*
 * controller/fleet/spot_traces.h: reading the public spot traces that
 * controller/fleet/spot_fit.h fits (the imperative shell around it).
 *
 * The skypilot-spot-traces files ("Can't Be Late", NSDI '24; see
 * ../shared/traces/spot/README.md section 1) are JSON:
 *
 *   {"metadata": {"gap_seconds": G}, "data": [v0, v1, ...]}
 *
 * data[i] is the value at start + i x G; in the published files 1 means
 * available / up (the raw files of skypilot-spot-strategy-raw/ use the
 * opposite and are not read here).  The files are parsed with cJSON.
 *
 * Errors name the file and the problem, with line and column when the
 * JSON itself is malformed: "FILE:3:14: malformed JSON", "FILE: no
 * \"metadata.gap_seconds\"", "FILE: value -1 at index 4 is not ...".
 * On any error nothing is fitted.
 */
#ifndef TM_SPOT_TRACES_H
#define TM_SPOT_TRACES_H

#include <stddef.h>

#include "controller/fleet/spot_fit.h"

/* Read one trace file: *ret_v is malloc'ed (free()).  0; TM_EINVAL with
 * err filled; TM_ENOMEM. */
int tm_spot_trace_read(const char *path, double *ret_gap_s, double **ret_v, size_t *ret_n,
                       char *err, size_t errlen);

/* Fit every *.json under root/preemption and root/availability (root is a
 * skypilot-spot-traces folder, or a folder holding one), in path order.
 * *ret is malloc'ed (free()).  0; TM_EINVAL with err filled (also when no
 * file is found); TM_ENOMEM. */
int tm_spot_traces_fit(const char *root, struct tm_spot_file_fit **ret, size_t *ret_n, char *err,
                       size_t errlen);

#endif
