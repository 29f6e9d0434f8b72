/*
 * providers/azure/azure_config.h: kind azure's block of the configuration
 * (azure_config.c fills it from a provider's azure: section; core holds it
 * at p->kind_block without knowing what is in it).
 */
#ifndef TM_AZURE_CONFIG_H
#define TM_AZURE_CONFIG_H

#include "core/config.h"

/* azure: where the VMs go and who tarmac is to Azure (providers/azure/).
 * The client secret itself never lives in the file: credentials.source
 * "env" reads $AZURE_CLIENT_SECRET, "file" reads credentials.file, and
 * "instance_role" uses the VM's managed identity; or client_certificate
 * names a key and certificate file. */
struct tm_config_azure {
    char *tenant_id;              /* required for kind azure */
    char *subscription_id;        /* required */
    char *resource_group;         /* required */
    char *client_id;              /* app (client) id; NULL: $AZURE_CLIENT_ID */
    char *subnet_id;              /* required: the NIC each VM creates joins it */
    char *image;                  /* "publisher:offer:sku:version" or an image resource id */
    char *admin_username;         /* default "tarmac" */
    char *ssh_public_key;         /* required: Linux VMs take no password */
    char *authority;              /* identity platform, default https://login.microsoftonline.com */
    char *imds_endpoint;          /* instance metadata, default http://169.254.169.254 */
    char *ca_file;                /* extra CA bundle (tests' loopback fakes), may be NULL */
    /* A PEM file with the app's RSA private key and its certificate (core/
     * client_cert.h): tokens are asked for with a signed client assertion
     * instead of a secret.  May be NULL; when set, credentials.source must
     * name no secret ("none", the default).  Checked at load. */
    char *client_certificate;
};

/* The block of p, a provider of kind azure (never NULL once loaded). */
static inline const struct tm_config_azure *tm_azure_config(const struct tm_config_provider *p)
{
    return (const struct tm_config_azure *)p->kind_block;
}

#endif
