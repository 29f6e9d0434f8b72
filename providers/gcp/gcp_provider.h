/*
 * providers/gcp/gcp_provider.h: Compute Engine behind struct tm_provider_ops.
 *
 * launch   1. instances.aggregatedList filtered by the cluster and launch
 *             token labels: an instance with that token is returned as it
 *             is, never launched again (a kill -9 between insert and the
 *             database write is repaired here).
 *          2. Offerings: the request's zone or every zone of its pool,
 *             spot, on-demand or spot then on-demand, minus what the
 *             shortage memory holds.  For each, instances.insert with
 *             requestId = a UUID from (token, zone, type, market), the
 *             instance name derived from the token (so a second insert in
 *             the same zone is alreadyExists, taken as ours), labels
 *             tarmac-cluster/-pool/-node-id/-launch-token, the bootstrap as
 *             metadata startup-script; the operation is followed with
 *             zoneOperations.wait to DONE.  ZONE_RESOURCE_POOL_EXHAUSTED(
 *             _WITH_DETAILS) and QUOTA_EXCEEDED (TM_EQUOTA) are remembered
 *             for shortage_ttl_ms and the next offering is tried.
 * terminate  instances.delete on "ZONE/NAME", followed to DONE; TM_ENOTFOUND
 *             when GCE does not know it.
 * list     instances.aggregatedList with the cluster label filter, every
 *          page; then, for the zones of spot pools, zoneOperations.list of
 *          compute.instances.preempted: a preempted VM that GCE already
 *          deleted is listed TERMINATED with interrupted = true, and a
 *          spot VM that is STOPPING/TERMINATED is interrupted too.
 * price    From the provider's configured instance_types.
 * launch_set  A gang: instances.bulkInsert with count = minCount = N in
 *          one zone (the pool's placement_group as a compact resource
 *          policy), found again by the set label after a crash, then each
 *          member tagged with its own token, node id and bootstrap
 *          (setMetadata, setLabels) before the set is reported; any
 *          failure deletes what the set label shows (gcp_launch_set.c).
 *
 * Instance ids are "ZONE/NAME": a delete needs the zone, and names are
 * unique within one.
 */
#ifndef TM_GCP_PROVIDER_H
#define TM_GCP_PROVIDER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "core/config.h"
#include "providers/gcp/gce.h"
#include "providers/provider.h"

struct tm_gcp_provider_options {
    struct tm_gce_retry retry;    /* zeros: gce.h defaults */
    long timeout_ms;
    uint64_t auth_cooldown_ms;
    uint64_t shortage_ttl_ms;     /* 0 = 10 min */
    int list_page_size;           /* maxResults; 0 = 500 */
    const char *image;            /* NULL: config image_id, $TARMAC_GCP_IMAGE, debian-12 */
    uint64_t seed;
};

/*
 * Resolve where tokens come from for prov (credentials.source: file = the
 * key file credentials.file; env = $GOOGLE_APPLICATION_CREDENTIALS; none =
 * that variable if set, else the metadata server; instance_role = the
 * metadata server).  A key file is read and checked here: a malformed or
 * truncated one is TM_EINVAL with err naming the config field and the key
 * field.  key is filled for key sources (release it).
 */
int tm_gcp_resolve_auth(const struct tm_config_provider *prov, size_t index,
                        struct tm_gcp_key *key, struct tm_gcp_token_options *ret_opts, char *err,
                        size_t errsize);

/* Without opts: TARMAC_GCP_MAX_ATTEMPTS, TARMAC_GCP_MAX_RETRY_DELAY_MS,
 * TARMAC_GCP_BASE_DELAY_MS, TARMAC_GCP_TIMEOUT_MS, TARMAC_GCP_PAGE_SIZE
 * when set, else the defaults. */
int tm_gcp_provider_create(uv_loop_t *loop, const struct tm_config *cfg,
                           const struct tm_config_provider *prov, struct tm_provider **ret);
int tm_gcp_provider_create_ex(uv_loop_t *loop, const struct tm_config *cfg,
                              const struct tm_config_provider *prov,
                              const struct tm_gcp_provider_options *opts, struct tm_provider **ret);

/* As tm_aws_validate_pools(): every zone of every pool (zones.get) and
 * every machine type (machineTypes.get in the pool's first zone), GPUs
 * compared with the pool's gpu_model and gpus_per_node.  TM_EINVAL with a
 * reason naming the pool and the zone or type GCE does not know. */
typedef void (*tm_gcp_validate_cb)(int status, const char *reason, void *data);
int tm_gcp_validate_pools(struct tm_provider *p, tm_gcp_validate_cb cb, void *data);

bool tm_gcp_provider_is_short(struct tm_provider *p, const char *type, const char *zone,
                              enum tm_capacity_type capacity);
struct tm_gce *tm_gcp_provider_gce(struct tm_provider *p);

/*
 * `tarmac check gcp [--project P] [--zones Z1,...] [--machine-types T1,...]
 *                   [--key-file F] [--endpoint URL] [--token-url URL]
 *                   [--metadata-url URL]`
 * Gets a token as the controller would (key file from --key-file or
 * $GOOGLE_APPLICATION_CREDENTIALS, else the metadata server), checks each
 * zone (zones.get) and each machine type in the first zone, printing
 * "TYPE gpus=N model=M" lines.  Exit 0 ok, 3 authentication failed or no
 * credentials (never the key or a token), 1 other failure, 2 bad usage.
 */
int tm_gcp_check_main(int argc, char **argv);

/* "nvidia-tesla-a100" -> "A100"; "" when unknown. */
const char *tm_gcp_gpu_model(const char *accelerator);

#endif
