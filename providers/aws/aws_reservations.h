/*
 * providers/aws/aws_reservations.h: the AWS provider's reserved capacity
 * (providers/common/reservations.h), kept fresh from EC2.
 *
 * DescribeCapacityReservations, one call for every id the provider's pools
 * name, refreshed at most every refresh_ms (the provider asks at each
 * listing, so every few ticks): the instance type, zone, total and
 * available counts, start, end, state and whether it is a Capacity Block,
 * laid over what the file states.  A reservation EC2 calls cancelled,
 * expired or failed (or no longer knows: its id in a NotFound answer) is
 * never launched into again, said once in the log.  At start
 * (aws_reservations_check) a reservation of another instance type or zone
 * than its pool's, an ended one or one EC2 does not know is refused with
 * EC2's answer.
 */
#ifndef TM_AWS_RESERVATIONS_H
#define TM_AWS_RESERVATIONS_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "providers/aws/ec2.h"
#include "providers/common/pools.h"
#include "providers/common/reservations.h"

/* Refresh at most this often by default (TARMAC_AWS_RESERVATION_REFRESH_MS). */
#define TM_AWS_RESERVATION_REFRESH_MS (60 * 1000)

struct aws_reservations {
    struct tm_reservations rs;
    struct tm_ec2 *ec2;
    uv_loop_t *loop;
    const char *provider;         /* the provider's name, for the log */
    const bool *closing;
    uint64_t refresh_ms;
    uint64_t at;                  /* uv_now() of the last refresh start, 0 never */
    bool inflight;
    /* Reservations that ended while running, for the controller's
     * decisions (aws_reservations_notices); the oldest kept when full. */
    struct tm_provider_notice notices[16];
    size_t nnotices;
};

/* Start a refresh unless one is under way or the last is fresh enough;
 * nothing when the provider names no reservation. */
void aws_reservations_refresh(struct aws_reservations *ar);

/* Hand over the notices kept (provider.h's ops->notices). */
size_t aws_reservations_notices(struct aws_reservations *ar, struct tm_provider_notice *out,
                                size_t max);

/* At start: ask EC2 about every reservation and check each against its
 * pool.  cb as tm_aws_validate_cb (status 0 sound, TM_EINVAL with EC2's
 * answer, another code when EC2 could not be asked).  Returns 0 (cb fires
 * later), 1 when there is nothing to check (cb never fires), or a negative
 * code. */
int aws_reservations_check(struct aws_reservations *ar, const struct tm_provider_pool *pools,
                           size_t npools, void (*cb)(int status, const char *reason, void *data),
                           void *data);

#endif
