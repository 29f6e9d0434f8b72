/*
 * controller/agent/metadata_local.c: the local provider's fake metadata
 * service, a notice file in the node's folder (providers/local/ writes it
 * when `tarmac local interrupt` or a test asks).  Read each period; absent
 * or empty means no notice.  The file is a few hundred bytes on the local
 * disk, read in one call: no network, nothing the loop waits on.
 *
 * The ack writes the event id to "ack" beside the notice file, which the
 * local provider reads as "drained: stop the node now".
 */
#include "controller/agent/metadata_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/file.h"
#include "core/log.h"

enum { SLOT_NOTICE };

static const char *path_of(const struct tm_md_watch *w)
{
    return strncmp(w->base, "file://", 7) == 0 ? w->base + 7 : w->base;
}

static void poll_local(struct tm_md_watch *w)
{
    struct tm_md_notice n;
    const char *field = NULL;
    char *body = NULL, err[256];
    size_t len = 0;
    int r = tm_file_read(path_of(w), 64 * 1024, &body, &len, err, sizeof(err));

    if (r == -ENOENT || (r == 0 && len == 0)) {
        md_up(w);
        md_sound(w, SLOT_NOTICE);
        free(body);
        return;
    }
    if (r < 0) {
        if (!w->down_logged)
            tm_log_warn("could not read the local notice file, will keep trying",
                        "kind=local error=\"%s\"", err);
        w->down_logged = true;
        return;
    }
    md_up(w);
    r = tm_md_parse_local_notice(body, len, &n, &field);
    free(body);
    if (r < 0) {
        md_bad(w, SLOT_NOTICE, "notice", field);
        return;
    }
    md_sound(w, SLOT_NOTICE);
    md_notice(w, &n);
}

static int ack_local(struct tm_md_watch *w, const struct tm_md_notice *n)
{
    char dir[MD_URL_MAX], path[MD_URL_MAX + 8];
    const char *slash;
    int fd;
    ssize_t wr;
    size_t len = strlen(n->event_id);

    snprintf(dir, sizeof(dir), "%s", path_of(w));
    slash = strrchr(dir, '/');
    if (slash)
        dir[slash - dir] = '\0';
    else
        snprintf(dir, sizeof(dir), ".");
    snprintf(path, sizeof(path), "%s/ack", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    wr = write(fd, n->event_id, len);
    close(fd);
    return wr == (ssize_t)len ? 0 : TM_EUNAVAIL;
}

const struct md_service tm_md_local = {
    .kind = "local",
    .default_base = NULL,
    .no_http = true,
    /* The local provider's nodes share this host. */
    .address = {.fixed = "127.0.0.1"},
    .poll = poll_local,
    .ack = ack_local,
};
