/*
 * controller/api/routes.h: tarmac's HTTP API, /v1 and the public routes
 * (routes.c), as the table the daemon hands to tm_api_start().
 */
#ifndef TM_API_ROUTES_H
#define TM_API_ROUTES_H

#include "controller/api/server.h"

extern const struct tm_api_routes tm_api_v1_routes;

#endif
