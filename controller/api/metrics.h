/*
 * controller/api/metrics.h: GET /metrics, the Prometheus text exposition
 * (format 0.0.4).  The route is listed in the route table (routes.c) and
 * follows the contract of api/internal.h.  Which families it has, their
 * units and windows: docs/openapi.yaml and api/metrics.c.
 */
#ifndef TM_API_METRICS_H
#define TM_API_METRICS_H

struct api_call;

/* GET /metrics: public, like /healthz. */
void tm_api_metrics(struct api_call *c);

#endif
