/*
 * providers/azure/azure_provider.h: Azure virtual machines behind struct
 * tm_provider_ops.
 *
 * launch   1. GET the node's VM by name (tm_arm_vm_name: "tm-CLUSTER-NODE",
 *             so the name is the idempotency key): one that exists and has
 *             not failed is returned as it is, never made again; a Failed
 *             one (an allocation that did not happen) is deleted first.
 *          2. Offerings: the request's size in its zone, or in every zone of
 *             its pool; spot, on-demand, or spot then on-demand; minus the
 *             (size, zone, market) triples the shortage memory holds.
 *          3. PUT the VM (priority Spot, evictionPolicy Delete, maxPrice -1
 *             for spot; tags tarmac-cluster, -pool, -node-id, -launch-token;
 *             the bootstrap as osProfile.customData; its NIC made inline on
 *             the configured subnet, NIC and OS disk with deleteOption
 *             Delete), follow Azure-AsyncOperation to a terminal state, GET
 *             the VM.  A capacity or quota error (TM_EQUOTA, sync or from
 *             the operation) is remembered, the failed VM deleted, and the
 *             next offering tried; none left: TM_EQUOTA.
 * terminate  DELETE the VM (and with it its NIC and disk), followed to the
 *          end; a VM already gone is success.
 * list     VirtualMachines_List of the resource group, every nextLink page,
 *          kept when the tarmac-cluster tag matches (ARM filters VM lists by
 *          scale set only, so the tag filter is ours).  A spot VM Azure is
 *          deleting that tarmac did not ask to delete, and one that vanished
 *          since the last listing, come with interrupted = true: eviction
 *          with evictionPolicy Delete.
 * price    From the provider's configured instance types.
 */
#ifndef TM_AZURE_PROVIDER_H
#define TM_AZURE_PROVIDER_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "core/client_cert.h"
#include "core/config.h"
#include "providers/azure/arm.h"
#include "providers/provider.h"

struct tm_azure_provider_options {
    struct tm_arm_retry retry;    /* zeros: arm.h defaults */
    long timeout_ms;
    uint64_t auth_cooldown_ms;
    uint64_t shortage_ttl_ms;     /* 0 = 10 min */
    uint64_t poll_ms;             /* 0 = 2 s */
    uint64_t seed;
};

/*
 * Create the provider for prov (kind "azure") of cfg on loop.  Credentials:
 * azure.client_certificate (a PEM key and certificate: a signed client
 * assertion), else prov->credentials: "env" $AZURE_CLIENT_SECRET, "file"
 * the file's first line, "instance_role" the managed identity (no secret).
 * Endpoint: prov->endpoint, else $TARMAC_AZURE_ENDPOINT, else ARM's.  Retry
 * budget from TARMAC_AZURE_MAX_ATTEMPTS / _MAX_RETRY_DELAY_MS / _TIMEOUT_MS /
 * _POLL_MS when set.  Returns 0 and *ret, or TM_EINVAL / TM_EAUTH (no
 * secret) / TM_ENOMEM; errors are logged, without the secret.
 */
int tm_azure_provider_create(uv_loop_t *loop, const struct tm_config *cfg,
                             const struct tm_config_provider *prov, struct tm_provider **ret);

int tm_azure_provider_create_ex(uv_loop_t *loop, const struct tm_config *cfg,
                                const struct tm_config_provider *prov,
                                const struct tm_azure_provider_options *opts,
                                struct tm_provider **ret);

/* Whether the shortage memory holds (size, zone, capacity) now. */
bool tm_azure_provider_is_short(struct tm_provider *p, const char *vm_size, const char *zone,
                                enum tm_capacity_type capacity);

struct tm_arm *tm_azure_provider_arm(struct tm_provider *p);

/* The secret named by creds, read as the provider does, into a malloc'd
 * string (*ret, NULL for instance_role).  0, or TM_EAUTH with why. */
int tm_azure_read_secret(const struct tm_config_credentials *creds, char **ret, char *why,
                         size_t whysize);

/* Who tarmac is to Azure, as the provider and `tarmac check azure` read it. */
struct tm_azure_credential {
    enum tm_arm_auth_mode auth;
    char *secret;                 /* TM_ARM_AUTH_SECRET: wiped by release */
    struct tm_client_cert cert;   /* TM_ARM_AUTH_CERTIFICATE */
};

/*
 * azure.client_certificate when set (the PEM file read again and checked
 * as at config load: key, certificate, their match), else the secret of
 * prov->credentials, else the managed identity.  0, or TM_EAUTH with why
 * (naming the key or variable, never the secret), TM_ENOMEM.
 */
int tm_azure_credential_read(const struct tm_config_provider *prov,
                             struct tm_azure_credential *ret, char *why, size_t whysize);
void tm_azure_credential_release(struct tm_azure_credential *cred);

/*
 * `tarmac check azure --config FILE [--provider NAME] [--vm-sizes S1,S2]`
 * Gets a token as the controller would, lists the resource group's VMs
 * (proves subscription and group), and looks up the pools' VM sizes (or
 * --vm-sizes) and zones in Resource SKUs for the region.  Exit 0 ok, 3 auth
 * failed or no credentials (said on stderr, never the secret), 1 any other
 * failure (an unknown size or zone named), 2 bad usage.
 */
int tm_azure_check_main(int argc, char **argv);

#endif
