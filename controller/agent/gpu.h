/*
 * controller/agent/gpu.h: what the node's GPUs are doing.
 *
 * Two sources behind one reader: NVML, loaded at run time with
 * dlopen("libnvidia-ml.so.1") so the agent builds and runs where no GPU
 * is (gpu_nvml.c), and the fake file of the agent contract, re-read at
 * every sample so a test may change it while the agent runs (gpu_fake.c):
 *
 *   {"gpus":[{"uuid":"GPU-fake-0","name":"Fake A100","util_percent":0,
 *             "memory_used_mib":0,"memory_total_mib":81920,
 *             "temperature_c":30,"power_w":60}]}
 *
 * A fake GPU may also give "busy_util_percent": what it reports while a
 * job of this agent holds it (tm_gpu_reading_mark_busy), so that a fleet
 * of fake nodes shows utilisation that follows its jobs; without it the
 * file's util_percent stands, busy or not.
 *
 * A reading is every GPU at one instant; the agent keeps readings as
 * samples until a heartbeat carries them.
 */
#ifndef TM_AGENT_GPU_H
#define TM_AGENT_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TM_GPU_MAX 16   /* the controller takes GPU indices 0..15 */
#define TM_GPU_MAX_PROCS 16

struct tm_gpu_proc {
    int pid;
    int64_t used_memory_mib;
};

struct tm_gpu_sample {
    int gpu_index;
    int64_t at_ms;
    double util_percent;
    int64_t memory_used_mib;
    int64_t memory_total_mib;
    double temperature_c;
    double power_w;
    int nprocs;
    struct tm_gpu_proc procs[TM_GPU_MAX_PROCS];
};

struct tm_gpu_info {
    int index;
    char uuid[96];
    char name[96];
    int64_t memory_total_mib;
};

struct tm_gpu_reading {
    int count;
    struct tm_gpu_info info[TM_GPU_MAX];
    struct tm_gpu_sample sample[TM_GPU_MAX];
    /* The fake file's busy_util_percent per GPU, where it gives one. */
    bool busy_given[TM_GPU_MAX];
    double busy_util_percent[TM_GPU_MAX];
};

/* Parse the fake file's text into r (all at_ms = now_ms).  Pure.  0, or
 * TM_EINVAL with err naming the field ("gpus[1].util_percent: must be a
 * number 0..100"). */
int tm_gpu_fake_parse(const char *body, size_t len, int64_t now_ms, struct tm_gpu_reading *r,
                      char *err, size_t errlen);

/* The GPUs whose index is set in busy_mask (bit i: index i) and that have
 * a busy_util_percent report it instead of their idle figures.  Pure. */
void tm_gpu_reading_mark_busy(struct tm_gpu_reading *r, uint32_t busy_mask);

enum tm_gpu_kind { TM_GPU_NONE, TM_GPU_FAKE, TM_GPU_NVML, TM_GPU_KIND_MAX };

struct tm_gpu_source;

/* Open the source: the fake file when fake_path is given, else NVML, else
 * none (*ret_kind says which; with none, tm_gpu_source_read returns 0 GPUs).
 * why receives why NVML is not there, for the one message at start. */
int tm_gpu_source_open(const char *fake_path, struct tm_gpu_source **ret, enum tm_gpu_kind *ret_kind,
                       char *why, size_t whylen);
/* Read every GPU now.  0, or a negative code with err saying why (a fake
 * file half written, an NVML call failing); r is then empty. */
int tm_gpu_source_read(struct tm_gpu_source *s, int64_t now_ms, struct tm_gpu_reading *r, char *err,
                       size_t errlen);
void tm_gpu_source_close(struct tm_gpu_source *s);

/* NVML (gpu_nvml.c): load the library; 0 or a negative code with why. */
struct tm_nvml;
int tm_nvml_open(struct tm_nvml **ret, char *why, size_t whylen);
int tm_nvml_read(struct tm_nvml *n, int64_t now_ms, struct tm_gpu_reading *r, char *err, size_t errlen);
void tm_nvml_close(struct tm_nvml *n);

#endif
