/*
 * controller/io/aws_credentials_files.c: the synchronous sources of the
 * credential chain (aws_credentials.h): the shared files (~/.aws/credentials
 * and ~/.aws/config, read by a small strict INI reader), and the region
 * and endpoint resolution.  The environment source and the asynchronous
 * instance-role provider are in credentials.c.
 */
#include "controller/io/aws_credentials.h"
#include "controller/io/aws_credentials_internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>

#include "controller/io/http_uv.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"

/* Shared files are a few hundred bytes; anything bigger is not one. */
#define INI_MAX_BYTES (64 * 1024)
#define INI_MAX_ENTRIES 4096

/* ---- The shared files: a small strict INI reader. ---- */

struct ini_entry {
    const char *section;  /* points into ini.text */
    const char *key;
    const char *value;
    unsigned line;
};

struct ini {
    char path[1024];
    char *text;           /* the file, edited in place: NULs end the pieces */
    size_t size;
    struct ini_entry *e;
    size_t n;
};

static void ini_release(struct ini *ini)
{
    if (ini->text) {
        OPENSSL_cleanse(ini->text, ini->size);
        free(ini->text);
    }
    free(ini->e);
    memset(ini, 0, sizeof(*ini));
}

static char *trim(char *s)
{
    char *e;

    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    *e = '\0';
    return s;
}

/*
 * Read and parse one file.  TM_ENOTFOUND when it does not exist (and
 * !required); TM_EINVAL for anything malformed, with "FILE:LINE: why" in
 * err.  No file content is ever copied into err: a line that fails to
 * parse may well be a pasted secret.
 *
 * Grammar (what botocore's RawConfigParser accepts, minus the rare parts):
 * blank lines; comments starting with '#' or ';'; "[section]"; "key = value"
 * or "key: value" at the start of a line; indented "key = value" lines
 * right after a key with an empty value (a nested block such as "s3 =",
 * kept out of the way: we do not read nested keys).  A key before any
 * section, a repeated section or a repeated key in one section is an error,
 * as in botocore.
 */
/* The file's bytes into ini->text, what fstat promised and no more (a
 * file growing under us is cut).  ini_load's returns. */
static int ini_read(const char *path, bool required, struct ini *ini, char *err, size_t errsize)
{
    struct stat st;
    ssize_t got;
    size_t off = 0;
    int fd, r = 0;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        r = -errno;
        if (r == -ENOENT && !required) {
            set_err(err, errsize, "%s does not exist", path);
            return TM_ENOTFOUND;
        }
        set_err(err, errsize, "could not open %s: %s", path, strerror(-r));
        return r == -ENOENT ? TM_EINVAL : r;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        set_err(err, errsize, "%s is not a regular file", path);
        r = TM_EINVAL;
        goto out;
    }
    if (st.st_size > INI_MAX_BYTES) {
        set_err(err, errsize, "%s is larger than %d bytes", path, INI_MAX_BYTES);
        r = TM_EINVAL;
        goto out;
    }
    ini->text = malloc((size_t)st.st_size + 1);
    ini->e = calloc(INI_MAX_ENTRIES, sizeof(*ini->e));
    if (!ini->text || !ini->e) {
        r = TM_ENOMEM;
        goto out;
    }
    ini->size = (size_t)st.st_size + 1;
    while (off < (size_t)st.st_size) {
        got = read(fd, ini->text + off, (size_t)st.st_size - off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            r = -errno;
            set_err(err, errsize, "could not read %s: %s", path, strerror(errno));
            goto out;
        }
        if (got == 0)
            break;
        off += (size_t)got;
    }
    ini->text[off] = '\0';
    if (memchr(ini->text, '\0', off)) {
        set_err(err, errsize, "%s: contains a NUL byte", path);
        r = TM_EINVAL;
    }
out:
    close(fd);
    return r;
}

/* One more entry, or the error at lineno. */
static int ini_add(struct ini *ini, struct ini_entry e, const char *path, char *err, size_t errsize)
{
    if (ini->n == INI_MAX_ENTRIES) {
        set_err(err, errsize, "%s:%u: too many entries", path, e.line);
        return TM_EINVAL;
    }
    ini->e[ini->n++] = e;
    return 0;
}

/* "[name]" at s (trimmed, not indented): a section marker (key NULL). */
static int ini_section(struct ini *ini, char *s, unsigned lineno, const char *path, const char **section,
                       char *err, size_t errsize)
{
    char *close = strchr(s, ']');
    char *name;

    if (!close || close[1] != '\0') {
        set_err(err, errsize, "%s:%u: section header has no closing ']' at its end", path, lineno);
        return TM_EINVAL;
    }
    *close = '\0';
    name = trim(s + 1);
    if (!*name) {
        set_err(err, errsize, "%s:%u: empty section name", path, lineno);
        return TM_EINVAL;
    }
    for (size_t i = 0; i < ini->n; i++) {
        if (!strcmp(ini->e[i].section, name) && ini->e[i].key == NULL) {
            set_err(err, errsize, "%s:%u: section \"%s\" repeats the one at line %u", path, lineno, name,
                    ini->e[i].line);
            return TM_EINVAL;
        }
    }
    *section = name;
    return ini_add(ini, (struct ini_entry){.section = name, .line = lineno}, path, err, errsize);
}

/* "key = value" (or "key: value") at s in section; an indented line is a
 * nested key, skipped, allowed only after "key =" (*nested_ok). */
static int ini_key(struct ini *ini, char *s, bool indented, unsigned lineno, const char *path,
                   const char *section, bool *nested_ok, char *err, size_t errsize)
{
    char *sep = strpbrk(s, "=:");
    char *key, *value;

    if (!sep || sep == s) {
        set_err(err, errsize, "%s:%u: expected \"key = value\" or \"[section]\"", path, lineno);
        return TM_EINVAL;
    }
    if (!section) {
        set_err(err, errsize, "%s:%u: key outside of any [section]", path, lineno);
        return TM_EINVAL;
    }
    if (indented) {
        if (!*nested_ok) {
            set_err(err, errsize, "%s:%u: indented line that does not follow \"key =\"", path, lineno);
            return TM_EINVAL;
        }
        return 0; /* a nested key: not one we read */
    }
    *sep = '\0';
    key = trim(s);
    value = trim(sep + 1);
    for (const char *c = key; *c; c++) {
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-' && *c != '.') {
            /* Do not quote the key: it may be half a secret. */
            set_err(err, errsize, "%s:%u: bad character in key name", path, lineno);
            return TM_EINVAL;
        }
    }
    for (size_t i = 0; i < ini->n; i++) {
        if (ini->e[i].key && ini->e[i].section == section && !strcasecmp(ini->e[i].key, key)) {
            set_err(err, errsize, "%s:%u: key \"%s\" repeats the one at line %u", path, lineno, key,
                    ini->e[i].line);
            return TM_EINVAL;
        }
    }
    *nested_ok = *value == '\0';
    return ini_add(ini, (struct ini_entry){.section = section, .key = key, .value = value, .line = lineno},
                   path, err, errsize);
}

static int ini_load(const char *path, bool required, struct ini *ini, char *err, size_t errsize)
{
    const char *section = NULL;
    bool nested_ok = false;
    unsigned lineno = 0;
    char *p;
    int r;

    memset(ini, 0, sizeof(*ini));
    snprintf(ini->path, sizeof(ini->path), "%s", path);
    r = ini_read(path, required, ini, err, errsize);
    for (p = ini->text; r == 0 && p && *p;) {
        char *nl = strchr(p, '\n');
        char *line = p, *s;
        bool indented;

        if (nl)
            *nl = '\0';
        p = nl ? nl + 1 : NULL;
        lineno++;
        indented = line[0] == ' ' || line[0] == '\t';
        s = trim(line);
        if (*s == '\0' || *s == '#' || *s == ';')
            continue;
        if (!indented && *s == '[') {
            r = ini_section(ini, s, lineno, path, &section, err, errsize);
            nested_ok = false;
        } else {
            r = ini_key(ini, s, indented, lineno, path, section, &nested_ok, err, errsize);
        }
    }
    if (r < 0)
        ini_release(ini);
    return r;
}

static bool ini_has_section(const struct ini *ini, const char *section)
{
    for (size_t i = 0; i < ini->n; i++) {
        if (!ini->e[i].key && !strcmp(ini->e[i].section, section))
            return true;
    }
    return false;
}

static const struct ini_entry *ini_get(const struct ini *ini, const char *section, const char *key)
{
    for (size_t i = 0; i < ini->n; i++) {
        if (ini->e[i].key && !strcmp(ini->e[i].section, section) && !strcasecmp(ini->e[i].key, key))
            return &ini->e[i];
    }
    return NULL;
}

static const char *profile_name(const struct tm_aws_credential_options *opts)
{
    if (opts && opts->profile && *opts->profile)
        return opts->profile;
    if (env_get("AWS_PROFILE"))
        return env_get("AWS_PROFILE");
    return "default";
}

/* Path of a shared file: explicit, else the variable, else ~/.aws/NAME.
 * *required says whether a missing file is an error (explicit only). */
static int shared_path(const char *explicit_path, const char *var, const char *name, char *out,
                       size_t size, bool *required)
{
    const char *home;
    int n;

    *required = false;
    if (explicit_path && *explicit_path) {
        *required = true;
        n = snprintf(out, size, "%s", explicit_path);
    } else if (env_get(var)) {
        n = snprintf(out, size, "%s", env_get(var));
    } else if ((home = env_get("HOME"))) {
        n = snprintf(out, size, "%s/.aws/%s", home, name);
    } else {
        return TM_ENOTFOUND;
    }
    return n < 0 || (size_t)n >= size ? TM_EINVAL : 0;
}

/* The config file's section for a profile: "[default]" or "[profile NAME]"
 * (the CLI also accepts "[profile default]"). */
static bool config_section(const struct ini *cfg, const char *profile, char *out, size_t size)
{
    snprintf(out, size, "profile %s", profile);
    if (ini_has_section(cfg, out))
        return true;
    if (!strcmp(profile, "default")) {
        snprintf(out, size, "default");
        return ini_has_section(cfg, out);
    }
    return false;
}

/* Credentials from one section, or TM_ENOTFOUND when it holds no keys. */
static int creds_from_section(const struct ini *ini, const char *section,
                              struct tm_aws_credentials *cred, char *err, size_t errsize)
{
    const struct ini_entry *ak = ini_get(ini, section, "aws_access_key_id");
    const struct ini_entry *sk = ini_get(ini, section, "aws_secret_access_key");
    const struct ini_entry *tok = ini_get(ini, section, "aws_session_token");
    char wak[1100], wsk[1100], wtok[1100];

    if (!tok)
        tok = ini_get(ini, section, "aws_security_token");
    if (!ak && !sk)
        return TM_ENOTFOUND;
    if (!ak || !sk) {
        set_err(err, errsize, "%s:%u: [%s] has %s but no %s", ini->path, (ak ? ak : sk)->line,
                section, ak ? "aws_access_key_id" : "aws_secret_access_key",
                ak ? "aws_secret_access_key" : "aws_access_key_id");
        return TM_EINVAL;
    }
    snprintf(wak, sizeof(wak), "%s:%u", ini->path, ak->line);
    snprintf(wsk, sizeof(wsk), "%s:%u", ini->path, sk->line);
    snprintf(wtok, sizeof(wtok), "%s:%u", ini->path, tok ? tok->line : 0);
    return tm_aws_credentials_fill(cred, ak->value, sk->value, tok && *tok->value ? tok->value : NULL,
                            "file", wak, wsk, wtok, err, errsize);
}

int tm_aws_credentials_from_files(const struct tm_aws_credential_options *opts,
                                  struct tm_aws_credentials *ret_cred, char *err, size_t errsize)
{
    struct tm_aws_credentials cred = {0};
    struct ini creds = {0}, cfg = {0};
    const char *profile = profile_name(opts);
    char cpath[1024] = "", fpath[1024] = "", section[300];
    bool creq = false, freq = false, have_c = false, have_f = false;
    int r;

    if (strlen(profile) > 200) {
        set_err(err, errsize, "profile name is longer than 200 characters");
        return TM_EINVAL;
    }
    r = shared_path(opts ? opts->credentials_file : NULL, "AWS_SHARED_CREDENTIALS_FILE",
                    "credentials", cpath, sizeof(cpath), &creq);
    if (r == 0) {
        r = ini_load(cpath, creq, &creds, err, errsize);
        if (r < 0 && r != TM_ENOTFOUND)
            goto out;
        have_c = r == 0;
    }
    r = shared_path(opts ? opts->config_file : NULL, "AWS_CONFIG_FILE", "config", fpath,
                    sizeof(fpath), &freq);
    if (r == 0) {
        r = ini_load(fpath, freq, &cfg, err, errsize);
        if (r < 0 && r != TM_ENOTFOUND)
            goto out;
        have_f = r == 0;
    }
    r = TM_ENOTFOUND;
    /* The credentials file wins over the config file, as in the CLI. */
    if (have_c && ini_has_section(&creds, profile))
        r = creds_from_section(&creds, profile, &cred, err, errsize);
    if (r == TM_ENOTFOUND && have_f && config_section(&cfg, profile, section, sizeof(section)))
        r = creds_from_section(&cfg, section, &cred, err, errsize);
    if (r == TM_ENOTFOUND)
        set_err(err, errsize, "no keys for profile \"%s\" in %s or %s", profile,
                cpath[0] ? cpath : "~/.aws/credentials", fpath[0] ? fpath : "~/.aws/config");
    if (r == 0)
        *ret_cred = cred;
out:
    tm_aws_credentials_clear(&cred);
    ini_release(&creds);
    ini_release(&cfg);
    return r;
}

/* ---- Region and endpoint. ---- */

static bool valid_region(const char *s)
{
    if (!s || !*s || strlen(s) > 63)
        return false;
    for (; *s; s++) {
        if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '-')
            return false;
    }
    return true;
}

int tm_aws_region_resolve(const char *config_region, const struct tm_aws_credential_options *opts,
                          char *out, size_t size, char *err, size_t errsize)
{
    const char *region = NULL;
    const char *from = NULL;
    struct ini cfg = {0};
    char fpath[1024], section[300], where[1100];
    bool req = false;
    int r = 0;

    if (config_region && *config_region) {
        region = config_region;
        from = "the configuration";
    } else if (env_get("AWS_REGION")) {
        region = env_get("AWS_REGION");
        from = "AWS_REGION";
    } else if (env_get("AWS_DEFAULT_REGION")) {
        region = env_get("AWS_DEFAULT_REGION");
        from = "AWS_DEFAULT_REGION";
    } else {
        const char *profile = profile_name(opts);
        const struct ini_entry *e;

        if (strlen(profile) > 200) {
            set_err(err, errsize, "profile name is longer than 200 characters");
            return TM_EINVAL;
        }
        r = shared_path(opts ? opts->config_file : NULL, "AWS_CONFIG_FILE", "config", fpath,
                        sizeof(fpath), &req);
        if (r == 0)
            r = ini_load(fpath, req, &cfg, err, errsize);
        if (r == TM_ENOTFOUND || (r == 0 && !config_section(&cfg, profile, section, sizeof(section)))) {
            r = TM_ENOTFOUND;
        } else if (r == 0 && (e = ini_get(&cfg, section, "region")) && *e->value) {
            snprintf(where, sizeof(where), "%s:%u", fpath, e->line);
            region = e->value;
            from = where;
        } else if (r == 0) {
            r = TM_ENOTFOUND;
        }
        if (r == TM_ENOTFOUND)
            set_err(err, errsize, "no AWS region: set region in the configuration, AWS_REGION, "
                    "or region in the config file profile");
        if (r < 0)
            goto out;
    }
    if (!valid_region(region)) {
        set_err(err, errsize, "%s: region \"%.64s\" is not a region name", from, region);
        r = TM_EINVAL;
        goto out;
    }
    if (strlen(region) >= size) {
        set_err(err, errsize, "%s: region does not fit", from);
        r = TM_EINVAL;
        goto out;
    }
    memcpy(out, region, strlen(region) + 1);
    r = 0;
out:
    ini_release(&cfg);
    return r;
}

int tm_aws_endpoint_resolve(const char *config_endpoint, const char *region, char *out, size_t size)
{
    const char *ep = NULL;
    size_t n;
    int w;

    if (config_endpoint && *config_endpoint)
        ep = config_endpoint;
    else if (env_get("AWS_ENDPOINT_URL_EC2"))
        ep = env_get("AWS_ENDPOINT_URL_EC2");
    else if (env_get("AWS_ENDPOINT_URL"))
        ep = env_get("AWS_ENDPOINT_URL");
    if (!ep) {
        if (!valid_region(region))
            return TM_EINVAL;
        w = snprintf(out, size, "https://ec2.%s.amazonaws.com", region);
        return w < 0 || (size_t)w >= size ? TM_EINVAL : 0;
    }
    if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8))
        return TM_EINVAL;
    n = strlen(ep);
    while (n > 0 && ep[n - 1] == '/')
        n--;
    if (n + 1 > size || n <= strlen("https://"))
        return TM_EINVAL;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)ep[i] <= ' ' || (unsigned char)ep[i] >= 127)
            return TM_EINVAL;
    }
    memcpy(out, ep, n);
    out[n] = '\0';
    return 0;
}
