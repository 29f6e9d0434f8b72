/*
 * controller/fleet/spot_traces.c: reading the skypilot spot traces (see
 * spot_traces.h); the fits themselves are in spot_fit.c.
 */
#include "controller/fleet/spot_traces.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>

#include "core/err.h"
#include "core/file.h"

/* The largest published file is under 200 KB; a limit keeps a wrong path
 * (a disk image, a device) from being read whole. */
#define TRACE_FILE_MAX (64u << 20)
#define TRACE_FILES_MAX 4096
#define TRACE_DEPTH_MAX 8

int tm_spot_trace_read(const char *path, double *ret_gap_s, double **ret_v, size_t *ret_n,
                       char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    const char *end = NULL;
    cJSON *doc = NULL;
    const cJSON *gap, *data, *x;
    double *v = NULL;
    size_t n = 0;
    int rc;

    rc = tm_file_read(path, TRACE_FILE_MAX, &text, &len, err, errlen);
    if (rc < 0)
        return rc == TM_ENOMEM ? rc : TM_EINVAL; /* unreadable: a bad input, with err */
    doc = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!doc) {
        /* cJSON points at where it gave up: name the line and column */
        size_t line = 1, col = 1;
        const char *stop = end && end >= text && end <= text + len ? end : text;
        for (const char *p = text; p < stop; p++) {
            if (*p == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        snprintf(err, errlen, "%s:%zu:%zu: malformed JSON (not a trace file?)", path, line, col);
        rc = TM_EINVAL;
        goto out;
    }
    gap = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "metadata"),
                                           "gap_seconds");
    data = cJSON_GetObjectItemCaseSensitive(doc, "data");
    if (!cJSON_IsNumber(gap)) {
        snprintf(err, errlen, "%s: no number \"metadata.gap_seconds\"", path);
        rc = TM_EINVAL;
        goto out;
    }
    if (!(gap->valuedouble > 0)) {
        snprintf(err, errlen, "%s: \"metadata.gap_seconds\" is %g, not positive", path, gap->valuedouble);
        rc = TM_EINVAL;
        goto out;
    }
    if (!cJSON_IsArray(data)) {
        snprintf(err, errlen, "%s: no array \"data\"", path);
        rc = TM_EINVAL;
        goto out;
    }
    n = (size_t)cJSON_GetArraySize(data);
    if (n == 0) {
        snprintf(err, errlen, "%s: \"data\" is empty", path);
        rc = TM_EINVAL;
        goto out;
    }
    v = malloc(n * sizeof(*v));
    if (!v) {
        rc = TM_ENOMEM;
        goto out;
    }
    n = 0;
    cJSON_ArrayForEach(x, data) {
        if (!cJSON_IsNumber(x)) {
            snprintf(err, errlen, "%s: \"data\" item %zu is not a number", path, n);
            rc = TM_EINVAL;
            goto out;
        }
        if (x->valuedouble < 0) {
            snprintf(err, errlen, "%s: \"data\" item %zu is negative (%g)", path, n, x->valuedouble);
            rc = TM_EINVAL;
            goto out;
        }
        v[n++] = x->valuedouble;
    }
    *ret_gap_s = gap->valuedouble;
    *ret_v = v;
    *ret_n = n;
    v = NULL;
    rc = 0;
out:
    free(v);
    cJSON_Delete(doc);
    free(text);
    return rc;
}

struct walk {
    char **paths; /* relative to the root */
    size_t n, cap;
};

static int walk_dir(const char *root, const char *rel, int depth, struct walk *w, char *err,
                    size_t errlen)
{
    char dir[TM_SPOT_PATH_MAX * 2];
    DIR *d;
    struct dirent *e;
    int rc = 0;

    if (depth > TRACE_DEPTH_MAX)
        return 0;
    if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", root, rel) >= sizeof(dir)) {
        snprintf(err, errlen, "%s/%s: path too long", root, rel);
        return TM_EINVAL;
    }
    d = opendir(dir);
    if (!d) {
        if (errno == ENOENT && depth == 0)
            return 0; /* a folder with only one of preemption/, availability/ */
        snprintf(err, errlen, "%s: could not open: %s", dir, strerror(errno));
        return TM_EINVAL;
    }
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char sub[TM_SPOT_PATH_MAX], full[TM_SPOT_PATH_MAX * 2];
        struct stat st;
        size_t nl = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", rel, e->d_name) >= sizeof(sub)) {
            snprintf(err, errlen, "%s/%s/%s: path too long", root, rel, e->d_name);
            rc = TM_EINVAL;
            break;
        }
        if ((size_t)snprintf(full, sizeof(full), "%s/%s", root, sub) >= sizeof(full) ||
            stat(full, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            rc = walk_dir(root, sub, depth + 1, w, err, errlen);
        } else if (S_ISREG(st.st_mode) && nl > 5 && strcmp(e->d_name + nl - 5, ".json") == 0) {
            if (w->n == TRACE_FILES_MAX) {
                snprintf(err, errlen, "%s: more than %d trace files", root, TRACE_FILES_MAX);
                rc = TM_EINVAL;
                break;
            }
            if (w->n == w->cap) {
                size_t nc = w->cap ? w->cap * 2 : 64;
                char **np = realloc(w->paths, nc * sizeof(*np));
                if (!np) {
                    rc = TM_ENOMEM;
                    break;
                }
                w->paths = np;
                w->cap = nc;
            }
            w->paths[w->n] = strdup(sub);
            if (!w->paths[w->n]) {
                rc = TM_ENOMEM;
                break;
            }
            w->n++;
        }
    }
    closedir(d);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int tm_spot_traces_fit(const char *root_in, struct tm_spot_file_fit **ret, size_t *ret_n, char *err,
                       size_t errlen)
{
    static const char *const kinds[] = {"preemption", "availability"};
    char root[TM_SPOT_PATH_MAX * 2], path[TM_SPOT_PATH_MAX * 3];
    struct walk w = {0};
    struct tm_spot_file_fit *files = NULL;
    struct stat st;
    int rc = 0;

    /* the folder itself, or the traces folder that holds it */
    snprintf(root, sizeof(root), "%s/skypilot-spot-traces", root_in);
    if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode))
        snprintf(root, sizeof(root), "%s", root_in);
    for (size_t k = 0; k < 2 && rc == 0; k++)
        rc = walk_dir(root, kinds[k], 0, &w, err, errlen);
    if (rc == 0 && w.n == 0) {
        snprintf(err, errlen, "%s: no preemption/**/*.json or availability/**/*.json trace files",
                 root_in);
        rc = TM_EINVAL;
    }
    if (rc < 0)
        goto out;
    qsort(w.paths, w.n, sizeof(*w.paths), cmp_str);
    files = calloc(w.n, sizeof(*files));
    if (!files) {
        rc = TM_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < w.n; i++) {
        struct tm_spot_file_fit *f = &files[i];
        char why[256];
        double gap, *v = NULL;
        size_t n = 0;

        snprintf(path, sizeof(path), "%s/%s", root, w.paths[i]);
        if (tm_spot_key_from_path(w.paths[i], &f->key, why, sizeof(why)) < 0) {
            snprintf(err, errlen, "%s: %s", path, why);
            rc = TM_EINVAL;
            goto out;
        }
        snprintf(f->path, sizeof(f->path), "%s", w.paths[i]);
        rc = tm_spot_trace_read(path, &gap, &v, &n, err, errlen);
        if (rc < 0)
            goto out;
        rc = tm_spot_fit_series(v, n, gap, f->key.nodes, f, why, sizeof(why));
        free(v);
        if (rc < 0) {
            snprintf(err, errlen, "%s: %s", path, why);
            goto out;
        }
    }
    *ret = files;
    *ret_n = w.n;
    files = NULL;
out:
    free(files);
    for (size_t i = 0; i < w.n; i++)
        free(w.paths[i]);
    free(w.paths);
    return rc;
}
