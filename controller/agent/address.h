/*
 * controller/agent/address.h: the node's address for its jobs' peers,
 * found once before the agent enrolls (the enrollment carries it, and the
 * controller keeps it on the node's row, migrations/0020).
 *
 *   --advertise-addr IP   that address, as the operator knows better
 *   --metadata local      127.0.0.1: the local provider's nodes share a host
 *   --metadata aws        IMDSv2: PUT /latest/api/token, then
 *                         GET /latest/meta-data/local-ipv4
 *   --metadata gcp        GET /computeMetadata/v1/instance/network-interfaces/0/ip
 *                         (Metadata-Flavor: Google)
 *   --metadata azure      GET /metadata/instance/network/interface/0/ipv4/ipAddress/0/
 *                         privateIpAddress?api-version=2021-02-01&format=text (Metadata: true)
 *   --metadata none       none: the node enrolls without one (a job of one
 *                         node still runs; a job of several waits, saying so)
 *
 * The cloud's answer must be an IP address (core/address.h); a service
 * that does not answer or answers anything else is said once and the node
 * enrolls without an address.  Nothing blocks: the requests go through
 * controller/io/http_uv.h on the agent's loop.
 */
#ifndef TM_AGENT_ADDRESS_H
#define TM_AGENT_ADDRESS_H

#include <stddef.h>

struct tm_http;

/* The address in a metadata answer's body: surrounding white space
 * trimmed, then an IP address.  0 and out filled, or TM_EBADREPLY. */
int tm_agent_address_parse(const char *body, size_t len, char *out, size_t outlen);

/* The address kind's nodes have without asking (the local provider's
 * share this host), or NULL. */
const char *tm_agent_address_fixed(const char *kind);

/* Find the address for kind at base_url (NULL or "": the cloud's default
 * root), then call done(data, address) once on the loop, address NULL
 * when none was found.  0, or TM_EINVAL (a kind without a service: done
 * is not called). */
int tm_agent_address_lookup(struct tm_http *http, const char *kind, const char *base_url,
                            void (*done)(void *data, const char *address), void *data);

#endif
