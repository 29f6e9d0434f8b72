/*
 * controller/agent/logtail.c: capped job logs and their tails (logtail.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "controller/agent/logtail.h"

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len;
    unsigned cp;

    if (s[0] < 0x80)
        return s[0] ? 1 : 0;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
        cp = s[0] & 0x1f;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3;
        cp = s[0] & 0x0f;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

void tm_utf8_clean(char *s, size_t len)
{
    size_t i = 0;

    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        size_t k = utf8_seq((const unsigned char *)s + i, len - i);
        /* The controller refuses control characters but tab, newline and
         * carriage return in a tail (they would reach terminals): binary
         * output must not make the exit report unsendable. */
        if (k == 0 || (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
            s[i++] = '?';
            continue;
        }
        i += k;
    }
}

size_t tm_agent_tail_format(const char *data, size_t len, int64_t dropped, char *out, size_t outlen)
{
    char note[160];
    size_t nlen = 0, room, take;

    if (outlen < TM_AGENT_TAIL_MAX + 1)
        return 0;
    if (dropped > 0)
        nlen = (size_t)snprintf(note, sizeof(note),
                                "[tarmac: output passed the log cap, %lld bytes dropped]\n",
                                (long long)dropped);
    room = TM_AGENT_TAIL_MAX - nlen;
    take = len < room ? len : room;
    memcpy(out, note, nlen);
    memcpy(out + nlen, data + len - take, take);
    /* A cut in the middle of a character: skip its continuation bytes. */
    if (take < len) {
        size_t skip = 0;
        while (skip < take && skip < 3 && ((unsigned char)out[nlen + skip] & 0xc0) == 0x80)
            skip++;
        memmove(out + nlen, out + nlen + skip, take - skip);
        take -= skip;
    }
    tm_utf8_clean(out + nlen, take);
    out[nlen + take] = '\0';
    return nlen + take;
}

size_t tm_agent_log_tail(const char *path, int64_t dropped, char *out, size_t outlen)
{
    char buf[TM_AGENT_TAIL_MAX];
    struct stat st;
    ssize_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd >= 0 && fstat(fd, &st) == 0) {
        off_t from = st.st_size > (off_t)sizeof(buf) ? st.st_size - (off_t)sizeof(buf) : 0;
        got = pread(fd, buf, sizeof(buf), from);
        if (got < 0)
            got = 0;
    }
    if (fd >= 0)
        close(fd);
    return tm_agent_tail_format(buf, (size_t)got, dropped, out, outlen);
}

int tm_agent_log_cap(const char *path, int64_t cap, int64_t *dropped)
{
    return tm_agent_log_cap_cut(path, cap, dropped, NULL);
}

int tm_agent_log_cap_cut(const char *path, int64_t cap, int64_t *dropped, struct tm_agent_log_cut *cut)
{
    char *keep = NULL;
    char note[160];
    struct stat st;
    ssize_t got;
    int fd, r = 0;
    size_t nkeep;

    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno;
    if (fstat(fd, &st) != 0) {
        r = -errno;
        goto out;
    }
    if (st.st_size <= cap)
        goto out;
    nkeep = (size_t)(cap / 2 < TM_AGENT_LOG_KEEP ? cap / 2 : TM_AGENT_LOG_KEEP);
    keep = malloc(nkeep ? nkeep : 1);
    if (!keep) {
        r = -ENOMEM;
        goto out;
    }
    got = pread(fd, keep, nkeep, st.st_size - (off_t)nkeep);
    if (got < 0) {
        r = -errno;
        goto out;
    }
    if (ftruncate(fd, 0) != 0) {
        r = -errno;
        goto out;
    }
    *dropped += st.st_size - got;
    snprintf(note, sizeof(note), "[tarmac: log passed its cap of %lld bytes, %lld bytes dropped so far]\n",
             (long long)cap, (long long)*dropped);
    /* O_APPEND is not set on this descriptor: write at the start. */
    if (pwrite(fd, note, strlen(note), 0) < 0 || pwrite(fd, keep, (size_t)got, (off_t)strlen(note)) < 0) {
        r = -errno;
        goto out;
    }
    if (cut)
        *cut = (struct tm_agent_log_cut){st.st_size - got, (int64_t)strlen(note)};
    r = 1;
out:
    free(keep);
    close(fd);
    return r;
}
