/*
 * providers/aws/aws_provider.h: EC2 behind struct tm_provider_ops.
 *
 * launch   1. DescribeInstances with tag:tarmac:launch-token=TOKEN (and the
 *             cluster tag): an instance with that token is returned as it
 *             is, never launched again.  EC2 honours ClientToken, emulators
 *             do not; the tag check holds on both.
 *          2. Offerings: the request's type in its zone, or in every zone of
 *             its pool; spot, on-demand, or spot then on-demand; minus the
 *             (type, zone, market) triples the shortage memory holds.
 *          3. Several spot offerings: CreateFleet type instant,
 *             price-capacity-optimized, over all of them (launch template
 *             "tarmac-CLUSTER" created on first use).  Otherwise RunInstances
 *             offering by offering.  Capacity and quota errors (TM_EQUOTA)
 *             are remembered for shortage_ttl_ms and the next offering is
 *             tried; when none is left the launch fails with TM_EQUOTA.
 *             Tags: tarmac:cluster, tarmac:pool, tarmac:node-id,
 *             tarmac:launch-token; ClientToken = the launch token.
 *          A reset or timeout after RunInstances/CreateFleet was sent goes
 *          back to step 1, so a launch the cloud did carry out is found.
 *          The walk (1, 2, the shortage memory, next-or-fail, back to 1) is
 *          the launch engine's (providers/common/launch.h); EC2's calls are
 *          its primitives in aws_provider.c.
 * launch_set (a gang) 1. DescribeInstances with tag:tarmac:launch-set=SET:
 *             a set found whole is tagged and returned, part of one is
 *             terminated.  2. CreateFleet instant, TotalTargetCapacity =
 *             MinTargetCapacity = N, SingleAvailabilityZone and
 *             SingleInstanceType, over the set's zone (or the pool's zones
 *             not short), the pool's placement group in each override;
 *             ClientToken = SET.  3. CreateTags on each instance: its node
 *             id and launch token.  Fewer instances than N are terminated
 *             and the set fails with TM_EQUOTA.  With a bootstrap, one
 *             RunInstances per node (tm_provider_launch_set_each), and so
 *             for a pool with reservations (each member into one first).
 * terminate  TerminateInstances; TM_ENOTFOUND when the id is unknown.
 * list     DescribeInstances with tag:tarmac:cluster=CLUSTER, every page.
 *          Spot instances the cloud reclaimed (stateReason
 *          Server.SpotInstance*) come with interrupted = true.
 * reserved A pool's reservations (aws_reservations.h) are the engine's
 *          first offers: RunInstances with CapacityReservationSpecification
 *          (and MarketType capacity-block for a block); a full one
 *          (InsufficientInstanceCapacity, ReservationCapacityExceeded) is
 *          passed over until EC2 next describes it, and the pool falls back
 *          to its capacity_type unless reservation_fallback is false.
 * price    From the provider's configured types; spot also from
 *          DescribeSpotPriceHistory, refreshed in the background.
 *
 * Every call goes through the EC2 client (ec2.h): retries with backoff
 * inside a budget, and after an authentication failure the provider stops
 * calling AWS (calls fail at once with TM_EAUTH) until the credentials
 * change or the cool-down ends; the log says so once, without a secret.
 */
#ifndef TM_AWS_PROVIDER_H
#define TM_AWS_PROVIDER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "core/config.h"
#include "providers/aws/ec2.h"
#include "providers/provider.h"

struct tm_aws_provider_options {
    struct tm_ec2_retry retry;    /* zeros: ec2.h defaults (5 attempts, 20 s) */
    long timeout_ms;              /* per request; 0 = 30 s */
    uint64_t auth_cooldown_ms;    /* 0 = 5 min */
    uint64_t shortage_ttl_ms;     /* how long a capacity shortage is remembered; 0 = 10 min */
    int list_page_size;           /* DescribeInstances MaxResults; 0 = 1000 */
    const char *image_id;         /* NULL: $TARMAC_AWS_IMAGE_ID */
    uint64_t seed;                /* jitter; 0 = from the clock */
    bool no_price_refresh;        /* never call DescribeSpotPriceHistory in the background */
    /* DescribeCapacityReservations at most this often; 0 =
     * $TARMAC_AWS_RESERVATION_REFRESH_MS, else 1 min */
    uint64_t reservation_refresh_ms;
    bool test_corrupt_signature;  /* tests only */
};

/*
 * Create the provider for prov (kind "aws") of cfg on loop.  Region and
 * endpoint are resolved as the AWS tools do (config, then AWS_REGION /
 * AWS_DEFAULT_REGION / profile; AWS_ENDPOINT_URL_EC2 / AWS_ENDPOINT_URL);
 * credentials come from prov->credentials through the chain in
 * controller/io/aws_credentials.h, fetched on first use.  The pools of cfg
 * that name prov are copied, so cfg may be released afterwards.  Retry budget and the other
 * knobs come from the environment when set (TARMAC_AWS_MAX_ATTEMPTS,
 * TARMAC_AWS_MAX_RETRY_DELAY_MS, TARMAC_AWS_TIMEOUT_MS, TARMAC_AWS_IMAGE_ID),
 * else the defaults above.  Returns 0 and *ret (close it with
 * ret->ops->close), or TM_EINVAL (not an aws provider, no region, bad
 * endpoint) / TM_ENOMEM; errors are logged.
 */
int tm_aws_provider_create(uv_loop_t *loop, const struct tm_config *cfg,
                           const struct tm_config_provider *prov, struct tm_provider **ret);

/* The same with explicit options (tests; NULL = defaults and environment). */
int tm_aws_provider_create_ex(uv_loop_t *loop, const struct tm_config *cfg,
                              const struct tm_config_provider *prov,
                              const struct tm_aws_provider_options *opts,
                              struct tm_provider **ret);

/*
 * Called once: status 0 when every pool of this provider is sound;
 * TM_EINVAL with reason (one line, e.g. `pool "h100": instance type
 * "p5.48xlarge" has 8 x NVIDIA H100, not A100`) when a pool names a type
 * AWS does not know or whose GPUs differ from the pool's gpu_model or
 * gpus_per_node; another code (TM_EAUTH, TM_EUNAVAIL, ...) with reason when
 * AWS could not be asked.  reason is valid only during the callback.
 */
typedef void (*tm_aws_validate_cb)(int status, const char *reason, void *data);

/*
 * Check the pools of an aws provider against DescribeInstanceTypes, one
 * call per pool, on the loop.  The controller calls it once at start for
 * each provider of kind "aws", after tm_aws_provider_create(), and refuses
 * to start (exit non-zero, reason logged) when cb gets TM_EINVAL; for other
 * failures it may start and let reconcile retry.  Returns 0 (cb will fire,
 * never inside this call) or a negative code (cb will not fire).
 */
int tm_aws_validate_pools(struct tm_provider *p, tm_aws_validate_cb cb, void *data);

/* Whether the shortage memory holds (type, zone, capacity) now. */
bool tm_aws_provider_is_short(struct tm_provider *p, const char *instance_type,
                              const char *zone, enum tm_capacity_type capacity);

/* Remember a shortage as if AWS had reported it (tests, and the controller
 * when an interruption notice says the pool is being reclaimed). */
void tm_aws_provider_note_short(struct tm_provider *p, const char *instance_type,
                                const char *zone, enum tm_capacity_type capacity);

/* A copy of the provider's row of reservation id, as EC2 last described
 * it (tests, diagnostics): 0, or TM_ENOTFOUND when no pool names it. */
struct tm_reservation;
int tm_aws_provider_reservation(struct tm_provider *p, const char *id, struct tm_reservation *ret);

/* The EC2 client under the provider (stats, auth gate; tests). */
struct tm_ec2 *tm_aws_provider_ec2(struct tm_provider *p);

/*
 * `tarmac check aws [--region R] [--instance-types T1,T2,...]
 *                   [--endpoint URL] [--profile P]`
 * argv[0] is "check", argv[1] is "aws".  Resolves credentials with the same
 * chain as the controller, calls DescribeInstanceTypes and prints one line
 * per type (GPU count and model) to stdout.  Without --instance-types it
 * lists every type that has GPUs.  Exit status: 0 success, 3 authentication
 * failed or no credentials (said on stderr, never the secret), 1 any other
 * failure, 2 bad usage.
 */
int tm_aws_check_main(int argc, char **argv);

#endif
