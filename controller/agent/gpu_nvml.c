/*
 * controller/agent/gpu_nvml.c: NVML through dlopen("libnvidia-ml.so.1").
 *
 * No nvml.h and no link dependency: the few entry points used are declared
 * here with the signatures of NVIDIA's nvml.h (nvmlReturn_t is an int enum,
 * 0 = NVML_SUCCESS; nvmlDevice_t an opaque pointer).  Processes come from
 * nvmlDeviceGetComputeRunningProcesses_v3 where the driver has it, else
 * the v1 symbol, whose element is the older two-field struct.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/agent/gpu.h"
#include "core/err.h"

typedef void *nvml_device;

struct nvml_utilization { unsigned int gpu, memory; };
struct nvml_memory { unsigned long long total, free, used; };
struct nvml_proc_v1 { unsigned int pid; unsigned long long used_gpu_memory; };
struct nvml_proc_v3 {
    unsigned int pid;
    unsigned long long used_gpu_memory;
    unsigned int gpu_instance_id, compute_instance_id;
};

#define NVML_SUCCESS 0
#define NVML_TEMPERATURE_GPU 0

struct tm_nvml {
    void *lib;
    int (*init)(void);
    int (*shutdown)(void);
    const char *(*error_string)(int);
    int (*count)(unsigned int *);
    int (*handle)(unsigned int, nvml_device *);
    int (*uuid)(nvml_device, char *, unsigned int);
    int (*name)(nvml_device, char *, unsigned int);
    int (*util)(nvml_device, struct nvml_utilization *);
    int (*memory)(nvml_device, struct nvml_memory *);
    int (*temperature)(nvml_device, int, unsigned int *);
    int (*power)(nvml_device, unsigned int *);               /* milliwatts */
    int (*procs_v3)(nvml_device, unsigned int *, struct nvml_proc_v3 *);
    int (*procs_v1)(nvml_device, unsigned int *, struct nvml_proc_v1 *);
};

static const char *nvml_err(struct tm_nvml *n, int rc)
{
    return n->error_string ? n->error_string(rc) : "error";
}

int tm_nvml_open(struct tm_nvml **ret, char *why, size_t whylen)
{
    struct tm_nvml *n = calloc(1, sizeof(*n));
    int rc;

    if (!n)
        return TM_ENOMEM;
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        snprintf(why, whylen, "libnvidia-ml.so.1 not found (%s)", dlerror());
        free(n);
        return TM_EUNAVAIL;
    }
    /* Casts through void * as POSIX dlsym requires. */
#define SYM(field, name) *(void **)(&n->field) = dlsym(n->lib, name)
    SYM(init, "nvmlInit_v2");
    SYM(shutdown, "nvmlShutdown");
    SYM(error_string, "nvmlErrorString");
    SYM(count, "nvmlDeviceGetCount_v2");
    SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
    SYM(uuid, "nvmlDeviceGetUUID");
    SYM(name, "nvmlDeviceGetName");
    SYM(util, "nvmlDeviceGetUtilizationRates");
    SYM(memory, "nvmlDeviceGetMemoryInfo");
    SYM(temperature, "nvmlDeviceGetTemperature");
    SYM(power, "nvmlDeviceGetPowerUsage");
    SYM(procs_v3, "nvmlDeviceGetComputeRunningProcesses_v3");
    SYM(procs_v1, "nvmlDeviceGetComputeRunningProcesses");
#undef SYM
    if (!n->init || !n->shutdown || !n->count || !n->handle || !n->uuid) {
        snprintf(why, whylen, "libnvidia-ml.so.1 lacks nvmlInit_v2 or the device calls");
        dlclose(n->lib);
        free(n);
        return TM_EUNAVAIL;
    }
    rc = n->init();
    if (rc != NVML_SUCCESS) {
        snprintf(why, whylen, "nvmlInit_v2 failed: %s", nvml_err(n, rc));
        dlclose(n->lib);
        free(n);
        return TM_EUNAVAIL;
    }
    *ret = n;
    return 0;
}

static void read_procs(struct tm_nvml *n, nvml_device d, struct tm_gpu_sample *s)
{
    unsigned int cnt = TM_GPU_MAX_PROCS;

    if (n->procs_v3) {
        struct nvml_proc_v3 p[TM_GPU_MAX_PROCS];
        if (n->procs_v3(d, &cnt, p) != NVML_SUCCESS)
            return; /* more than 16, or not supported: no process list this time */
        for (unsigned i = 0; i < cnt && i < TM_GPU_MAX_PROCS; i++) {
            s->procs[i].pid = (int)p[i].pid;
            s->procs[i].used_memory_mib = (int64_t)(p[i].used_gpu_memory >> 20);
        }
    } else if (n->procs_v1) {
        struct nvml_proc_v1 p[TM_GPU_MAX_PROCS];
        if (n->procs_v1(d, &cnt, p) != NVML_SUCCESS)
            return;
        for (unsigned i = 0; i < cnt && i < TM_GPU_MAX_PROCS; i++) {
            s->procs[i].pid = (int)p[i].pid;
            s->procs[i].used_memory_mib = (int64_t)(p[i].used_gpu_memory >> 20);
        }
    } else {
        return;
    }
    s->nprocs = cnt < TM_GPU_MAX_PROCS ? (int)cnt : TM_GPU_MAX_PROCS;
}

int tm_nvml_read(struct tm_nvml *n, int64_t now_ms, struct tm_gpu_reading *r, char *err, size_t errlen)
{
    unsigned int count = 0;
    int rc = n->count(&count);

    memset(r, 0, sizeof(*r));
    if (rc != NVML_SUCCESS) {
        snprintf(err, errlen, "nvmlDeviceGetCount_v2 failed: %s", nvml_err(n, rc));
        return TM_EUNAVAIL;
    }
    if (count > TM_GPU_MAX)
        count = TM_GPU_MAX;
    for (unsigned i = 0; i < count; i++) {
        struct tm_gpu_info *in = &r->info[r->count];
        struct tm_gpu_sample *s = &r->sample[r->count];
        struct nvml_utilization u = {0};
        struct nvml_memory m = {0};
        unsigned int t = 0, mw = 0;
        nvml_device d;

        rc = n->handle(i, &d);
        if (rc != NVML_SUCCESS) {
            snprintf(err, errlen, "nvmlDeviceGetHandleByIndex_v2(%u) failed: %s", i, nvml_err(n, rc));
            memset(r, 0, sizeof(*r));
            return TM_EUNAVAIL;
        }
        in->index = (int)i;
        if (n->uuid(d, in->uuid, sizeof(in->uuid)) != NVML_SUCCESS)
            snprintf(in->uuid, sizeof(in->uuid), "GPU-unknown-%u", i);
        if (!n->name || n->name(d, in->name, sizeof(in->name)) != NVML_SUCCESS)
            snprintf(in->name, sizeof(in->name), "NVIDIA GPU");
        if (n->memory && n->memory(d, &m) == NVML_SUCCESS) {
            in->memory_total_mib = (int64_t)(m.total >> 20);
            s->memory_used_mib = (int64_t)(m.used >> 20);
        }
        if (n->util && n->util(d, &u) == NVML_SUCCESS)
            s->util_percent = u.gpu;
        if (n->temperature && n->temperature(d, NVML_TEMPERATURE_GPU, &t) == NVML_SUCCESS)
            s->temperature_c = t;
        if (n->power && n->power(d, &mw) == NVML_SUCCESS)
            s->power_w = mw / 1000.0;
        s->gpu_index = (int)i;
        s->at_ms = now_ms;
        s->memory_total_mib = in->memory_total_mib;
        read_procs(n, d, s);
        r->count++;
    }
    return 0;
}

void tm_nvml_close(struct tm_nvml *n)
{
    if (!n)
        return;
    n->shutdown();
    dlclose(n->lib);
    free(n);
}
