/*
 * core/address.h: a node's address as its jobs' peers dial it.  The API
 * (enrollment), the agent (--advertise-addr, the heartbeat answer's
 * rendezvous) and the tests share this one check.
 */
#ifndef TM_CORE_ADDRESS_H
#define TM_CORE_ADDRESS_H

#include <stdbool.h>

/* Whether s is an IPv4 address in dotted form or an IPv6 address
 * (inet_pton), never a host name: the peers must reach it without a
 * resolver's say, and the same on every member. */
bool tm_ip_address_ok(const char *s);

#endif
