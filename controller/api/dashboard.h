/*
 * controller/api/dashboard.h: the dashboard at / (web/, embedded in the
 * binary at build time by cmake/embed_web.cmake) and the history it draws,
 * GET /v1/timeseries.  The routes are listed in api_routes[]
 * (api/routes.c); they follow the contract of api/internal.h.
 */
#ifndef TM_API_DASHBOARD_H
#define TM_API_DASHBOARD_H

#include <stddef.h>

struct api_call;

/* One file of web/: its name ("dashboard.js"), bytes and length. */
struct tm_web_asset {
    const char *name;
    const char *data;
    size_t len;
};

/* Generated (web_embedded.c); ends with an entry whose name is NULL. */
extern const struct tm_web_asset tm_web_assets[];

/* The asset called name, or NULL. */
const struct tm_web_asset *tm_web_asset_find(const char *name);

/* GET /, /dashboard.js, /dashboard.css: public, like /healthz.  The page
 * itself holds no data; its script reads the API with the operator's
 * token. */
void tm_api_dashboard_page(struct api_call *c);
void tm_api_dashboard_js(struct api_call *c);
void tm_api_dashboard_css(struct api_call *c);

/* GET /v1/timeseries?since_ms=&step_s=: GPUs provisioned, allocated and
 * idle, queued and running jobs, averaged over each step from since_ms to
 * now, plus the same figures at this instant (readers). */
void tm_api_timeseries(struct api_call *c);

#endif
