/*
 * tests/lib/gcp_fake_proc.h: the GCP fake (tests/lib/gcp_fake.py) as a
 * child process of a C test: a scratch folder with a service-account key,
 * the fake started on a free port with it, and both gone at teardown.
 *
 * gcp_fake_start(tag, extra): makes /tmp/tarmac-TAG.PID/key.json, starts the
 * fake with --key and extra arguments (e.g. "--op-delay-ms 50"), and waits
 * up to 10 s for its GCP_FAKE_PORT line.  0, or -1.  The folder, key path,
 * port and pid are in gcp_fake (one fake per test binary).
 */
#ifndef TM_TEST_GCP_FAKE_PROC_H
#define TM_TEST_GCP_FAKE_PROC_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static struct {
    char dir[256];
    char key_path[300];
    int port;
    pid_t pid;
} gcp_fake;

/* A second key of the same account in the fake's folder (a rotated or
 * wrong key): its path in out. */
static inline int gcp_fake_make_key(const char *name, char *out, size_t outsize)
{
    char cmd[1024];

    snprintf(out, outsize, "%s/%s", gcp_fake.dir, name);
    snprintf(cmd, sizeof(cmd), "mkdir -p %s && python3 %s/tests/lib/gcp_fake.py make-key %s "
             "c@tarmac-test.iam.gserviceaccount.com tarmac-test", gcp_fake.dir, TM_SOURCE_DIR, out);
    return system(cmd) == 0 ? 0 : -1;
}

static inline int gcp_fake_start(const char *tag, const char *extra)
{
    char cmd[2048], line[128];
    FILE *f;

    snprintf(gcp_fake.dir, sizeof(gcp_fake.dir), "/tmp/tarmac-%s.%d", tag, (int)getpid());
    if (gcp_fake_make_key("key.json", gcp_fake.key_path, sizeof(gcp_fake.key_path)) < 0)
        return -1;
    snprintf(cmd, sizeof(cmd), "python3 %s/tests/lib/gcp_fake.py --key %s %s "
             ">%s/fake.out 2>%s/fake.err & echo $!", TM_SOURCE_DIR, gcp_fake.key_path,
             extra ? extra : "", gcp_fake.dir, gcp_fake.dir);
    f = popen(cmd, "r");
    if (!f)
        return -1;
    if (!fgets(line, sizeof(line), f)) {
        pclose(f);
        return -1;
    }
    pclose(f);
    gcp_fake.pid = (pid_t)atoi(line);
    snprintf(cmd, sizeof(cmd), "%s/fake.out", gcp_fake.dir);
    for (int i = 0; i < 100 && !gcp_fake.port; i++) {
        f = fopen(cmd, "r");
        while (f && fgets(line, sizeof(line), f))
            if (strncmp(line, "GCP_FAKE_PORT=", 14) == 0)
                gcp_fake.port = atoi(line + 14);
        if (f)
            fclose(f);
        if (!gcp_fake.port)
            usleep(100000);
    }
    return gcp_fake.port ? 0 : -1;
}

static inline void gcp_fake_stop(void)
{
    char cmd[512];

    if (gcp_fake.pid > 0)
        kill(gcp_fake.pid, SIGKILL);
    gcp_fake.pid = 0;
    gcp_fake.port = 0;
    if (gcp_fake.dir[0]) {
        snprintf(cmd, sizeof(cmd), "rm -rf %s", gcp_fake.dir);
        (void)!system(cmd);
    }
}

#endif
