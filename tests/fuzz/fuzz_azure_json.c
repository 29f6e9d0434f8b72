/*
 * tests/fuzz/fuzz_azure_json.c: ARM and identity-platform answers through
 * every Azure parser (providers/azure/arm_json.c).
 *
 * Built two ways: as a libFuzzer target (TM_FUZZ=ON, clang), and with
 * TM_FUZZ_REPLAY as a plain program that replays a corpus directory, so
 * ctest runs the corpus with any compiler on every build.
 *
 * Properties beyond "no crash, no leak": a failure is TM_EBADREPLY or
 * TM_ENOMEM and names the call; a success hands back counts that match the
 * arrays, NUL-terminated names, and states within their enums.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "providers/azure/arm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void named(int s, const char *err, enum tm_arm_call call)
{
    if (s != TM_EBADREPLY && s != TM_ENOMEM)
        abort();
    if (s == TM_EBADREPLY && !strstr(err, tm_arm_call_name(call)))
        abort(); /* every failure names the call */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    char err[256] = "", code[64], msg[256], buf[TM_ARM_URL_MAX];
    struct tm_arm_vm vm, *vms = NULL;
    struct tm_arm_sku *skus = NULL;
    enum tm_arm_op_status st;
    size_t n = 0;
    char *next = NULL, *tok = NULL;
    int64_t exp;
    int s;

    s = tm_arm_parse_vm(body, size, &vm, err, sizeof(err));
    if (s == 0) {
        if (!vm.inst.id[0] || strnlen(vm.inst.id, TM_ID_MAX) == TM_ID_MAX ||
            vm.inst.state >= TM_INSTANCE_STATE_MAX)
            abort();
    } else {
        named(s, err, TM_ARM_GET_VM);
    }
    s = tm_arm_parse_vm_list(body, size, &vms, &n, &next, err, sizeof(err));
    if (s == 0) {
        if (n && !vms)
            abort();
        for (size_t i = 0; i < n; i++)
            if (!vms[i].inst.id[0] || strnlen(vms[i].cluster, TM_ID_MAX) == TM_ID_MAX)
                abort();
        if (next && strlen(next) >= TM_ARM_URL_MAX)
            abort();
        free(vms);
        free(next);
    } else if (vms || next) {
        abort();
    } else {
        named(s, err, TM_ARM_LIST_VMS);
    }
    s = tm_arm_parse_operation(body, size, &st, code, sizeof(code), msg, sizeof(msg), err,
                               sizeof(err));
    if (s == 0 && st > TM_ARM_OP_CANCELED)
        abort();
    if (s < 0)
        named(s, err, TM_ARM_POLL);
    s = tm_arm_parse_token(body, size, &tok, &exp, err, sizeof(err));
    if (s == 0) {
        if (!tok || !tok[0] || exp < 0)
            abort();
        free(tok);
    } else if (tok) {
        abort();
    } else {
        named(s, err, TM_ARM_TOKEN);
    }
    s = tm_arm_parse_openid(body, size, buf, sizeof(buf), err, sizeof(err));
    if (s == 0 && strncmp(buf, "https://", 8) != 0)
        abort();
    if (s < 0)
        named(s, err, TM_ARM_DISCOVERY);
    s = tm_arm_parse_skus(body, size, "eastus", &skus, &n, &next, err, sizeof(err));
    if (s == 0) {
        free(skus);
        free(next);
    } else {
        named(s, err, TM_ARM_LIST_SKUS);
    }
    s = tm_arm_parse_error(body, size, code, sizeof(code), msg, sizeof(msg));
    if (s != 0 && s != TM_EBADREPLY)
        abort();
    return 0;
}

#ifdef TM_FUZZ_REPLAY
#include "tests/fuzz/replay_main.h"
#endif
