/*
 * core/address.c: the address check (address.h).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "core/address.h"

bool tm_ip_address_ok(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];

    if (!s || !s[0] || strlen(s) >= INET6_ADDRSTRLEN)
        return false;
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}
