/*
 * tests/unit/providers/aws/test_sigv4.c: the SigV4 signer against AWS's published suite,
 * stage by stage, plus the form encoder, the secret hygiene and S3's
 * documented signatures.
 *
 * The suite lives in ../shared/specs/aws-sigv4-test-suite (found through
 * TM_SOURCE_DIR at run time); every NAME.req is parsed as a raw request
 * (request line, header lines with folded continuations, blank line, body)
 * and the canonical request, string to sign and Authorization value are
 * compared byte for byte with NAME.creq, NAME.sts and NAME.authz.
 *
 * Run as `test_sigv4 --sign-stdin` (`--sign-s3-stdin`) the binary is instead
 * the C side of the botocore cross-check (tests/lib/sigv4_botocore.py,
 * tests/lib/sigv4_s3_botocore.py): one JSON case per line in, one JSON
 * answer per line out.  Keeping the driver here keeps it
 * linked with exactly the code the unit test checks.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "core/err.h"
#include "core/log.h"
#include "core/sigv4.h"

#define SUITE_CASES 31
#define EXAMPLE_AK "AKIDEXAMPLE"
#define EXAMPLE_SK "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"

static char *read_file(const char *path, size_t *ret_len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        }
        if (buf) {
            buf[n] = '\0';
            if (ret_len)
                *ret_len = (size_t)n;
        }
    }
    fclose(f);
    return buf;
}

static const char *suite_dir(void)
{
    static char dir[1024];
    const char *src = getenv("TM_SOURCE_DIR");

    if (!src)
        src = TM_SOURCE_DIR;
    snprintf(dir, sizeof(dir), "%s/../shared/specs/aws-sigv4-test-suite", src);
    return dir;
}

/* A parsed .req: everything points into text, which the struct owns. */
struct raw_request {
    char *text;
    char *method, *path, *query;
    const char *headers[64];
    char *body;
    size_t body_len;
};

/*
 * "METHOD PATH[?QUERY] HTTP/1.1" (the path may hold a raw space, as in
 * normalize-path/get-space, so the version is found from the end), header
 * lines up to an empty line, then the body.  Lines that start with a space
 * are folded continuations: they stay separate entries, the signer joins.
 */
static int parse_req(const char *path, struct raw_request *rr)
{
    char *p, *eol, *sp, *ver;
    size_t n = 0, nh = 0;

    memset(rr, 0, sizeof(*rr));
    rr->text = read_file(path, &n);
    if (!rr->text)
        return -1;
    p = rr->text;
    eol = strchr(p, '\n');
    if (!eol)
        return -1;
    *eol = '\0';
    sp = strchr(p, ' ');
    ver = strstr(p, " HTTP/");
    if (!sp || !ver || ver < sp)
        return -1;
    *sp = '\0';
    *ver = '\0';
    rr->method = p;
    rr->path = sp + 1;
    rr->query = strchr(rr->path, '?');
    if (rr->query)
        *rr->query++ = '\0';
    p = eol + 1;
    while (*p) {
        eol = strchr(p, '\n');
        if (eol)
            *eol = '\0';
        if (*p == '\0') {
            p = eol ? eol + 1 : p;
            rr->body = p;
            rr->body_len = strlen(p);
            return 0;
        }
        if (nh + 1 >= sizeof(rr->headers) / sizeof(rr->headers[0]))
            return -1;
        rr->headers[nh++] = p;
        if (!eol)
            break;
        p = eol + 1;
    }
    rr->body = p + strlen(p);
    return 0;
}

static void cred_example(struct tm_aws_credentials *c, const char *token)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->access_key, sizeof(c->access_key), "%s", EXAMPLE_AK);
    snprintf(c->secret_key, sizeof(c->secret_key), "%s", EXAMPLE_SK);
    if (token)
        snprintf(c->session_token, sizeof(c->session_token), "%s", token);
}

static int compare(const char *name, const char *stage, const char *got, const char *want)
{
    if (strcmp(got, want) == 0)
        return 0;
    fprintf(stderr, "%s: %s differs\n--- want\n%s\n--- got\n%s\n---\n", name, stage, want, got);
    return 1;
}

/* One case: returns the number of stages that failed (0..3). */
static int run_case(const char *dir, const char *name)
{
    char path[2048];
    struct raw_request rr;
    struct tm_aws_credentials cred;
    char *want_creq, *want_sts, *want_authz;
    char *creq = NULL, *sts = NULL, *authz = NULL;
    int bad = 0;

    snprintf(path, sizeof(path), "%s/%s.req", dir, name);
    if (parse_req(path, &rr) < 0) {
        fprintf(stderr, "%s: cannot parse %s\n", name, path);
        free(rr.text);
        return 3;
    }
    snprintf(path, sizeof(path), "%s/%s.creq", dir, name);
    want_creq = read_file(path, NULL);
    snprintf(path, sizeof(path), "%s/%s.sts", dir, name);
    want_sts = read_file(path, NULL);
    snprintf(path, sizeof(path), "%s/%s.authz", dir, name);
    want_authz = read_file(path, NULL);
    assert_non_null(want_creq);
    assert_non_null(want_sts);
    assert_non_null(want_authz);

    struct tm_sigv4_request req = {
        .method = rr.method,
        .path = rr.path,
        .query = rr.query,
        .headers = rr.headers,
        .payload = rr.body,
        .payload_len = rr.body_len,
        .region = "us-east-1",
        .service = "service",
        .amz_date = "20150830T123600Z",
    };
    /* post-sts-header-before carries the token in its .req and so signs it;
     * post-sts-header-after adds it after signing, so the .req has none:
     * either way the signer signs exactly the headers it is given. */
    cred_example(&cred, NULL);
    if (tm_sigv4_canonical_request(&req, &creq) != 0) {
        fprintf(stderr, "%s: canonical request failed\n", name);
        bad = 3;
        goto out;
    }
    bad += compare(name, "canonical request", creq, want_creq);
    /* The string to sign is checked from the expected .creq, so a stage-1
     * bug does not hide whether stage 2 is right. */
    assert_int_equal(tm_sigv4_string_to_sign(&req, want_creq, &sts), 0);
    bad += compare(name, "string to sign", sts, want_sts);
    assert_int_equal(tm_sigv4_authorization(&req, &cred, &authz), 0);
    bad += compare(name, "authorization", authz, want_authz);
out:
    free(creq);
    free(sts);
    free(authz);
    free(want_creq);
    free(want_sts);
    free(want_authz);
    free(rr.text);
    return bad;
}

/* Walk the suite: a case is a folder NAME holding NAME.req. */
static void walk(const char *dir, int *ncases, int *nfailed)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0;

    assert_non_null(d);
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        names = realloc(names, (n + 1) * sizeof(*names));
        assert_non_null(names);
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    for (size_t i = 0; i < n; i++) {
        char sub[1024], req[2048];
        struct stat st;

        snprintf(sub, sizeof(sub), "%s/%s", dir, names[i]);
        if (stat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
            snprintf(req, sizeof(req), "%s/%s.req", sub, names[i]);
            if (stat(req, &st) == 0) {
                int bad = run_case(sub, names[i]);

                (*ncases)++;
                if (bad)
                    (*nfailed)++;
                fprintf(stderr, "sigv4 vector %-45s %s\n", names[i], bad ? "FAIL" : "ok");
            } else {
                walk(sub, ncases, nfailed);
            }
        }
        free(names[i]);
    }
    free(names);
}

static void test_suite_vectors(void **state)
{
    int ncases = 0, nfailed = 0;

    walk(suite_dir(), &ncases, &nfailed);
    fprintf(stderr, "sigv4 vectors: %d/%d passed\n", ncases - nfailed, ncases);
    assert_int_equal(ncases, SUITE_CASES);
    assert_int_equal(nfailed, 0);
}

/* The checker itself must be able to fail: a changed body, date, region or
 * secret changes the signature of a known vector. */
static void test_vector_mutations(void **state)
{
    const char *headers[] = {"Host:example.amazonaws.com", "X-Amz-Date:20150830T123600Z", NULL};
    struct tm_sigv4_request req = {
        .method = "GET", .path = "/", .headers = headers,
        .region = "us-east-1", .service = "service", .amz_date = "20150830T123600Z",
    };
    struct tm_aws_credentials cred;
    char *a = NULL, *b = NULL;
    char path[1200];
    char *want;

    snprintf(path, sizeof(path), "%s/get-vanilla/get-vanilla.authz", suite_dir());
    want = read_file(path, NULL);
    assert_non_null(want);
    cred_example(&cred, NULL);
    assert_int_equal(tm_sigv4_authorization(&req, &cred, &a), 0);
    assert_string_equal(a, want);
    cred.secret_key[0] ^= 1;
    assert_int_equal(tm_sigv4_authorization(&req, &cred, &b), 0);
    assert_string_not_equal(a, b);
    free(b);
    cred_example(&cred, NULL);
    req.payload = "x";
    req.payload_len = 1;
    assert_int_equal(tm_sigv4_authorization(&req, &cred, &b), 0);
    assert_string_not_equal(a, b);
    free(b);
    req.payload_len = 0;
    req.region = "us-east-2";
    assert_int_equal(tm_sigv4_authorization(&req, &cred, &b), 0);
    assert_string_not_equal(a, b);
    free(b);
    free(a);
    free(want);
}

static void test_canonical_details(void **state)
{
    const char *headers[] = {"Host:h", "X-B:  two   words  ", "x-a:1", "X-A:\t2", "  folded", NULL};
    struct tm_sigv4_request req = {
        .method = "GET", .path = "/a/./b/../c//d%2F/", .query = "b=2&a=%7e&a=1&c&%41=x+y",
        .headers = headers, .region = "r", .service = "s", .amz_date = "20150830T123600Z",
    };
    char *creq = NULL;

    assert_int_equal(tm_sigv4_canonical_request(&req, &creq), 0);
    assert_string_equal(creq, "GET\n"
                              "/a/c/d%252F/\n"
                              "A=x%2By&a=1&a=~&b=2&c=\n"
                              "host:h\n"
                              "x-a:1,2,folded\n"
                              "x-b:two words\n"
                              "\n"
                              "host;x-a;x-b\n"
                              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    free(creq);
}

static void test_bad_input(void **state)
{
    const char *good[] = {"Host:h", NULL};
    const char *nocolon[] = {"Host h", NULL};
    const char *fold_first[] = {" x", NULL};
    const char *empty_name[] = {":v", NULL};
    struct tm_sigv4_request req = {
        .method = "GET", .path = "/", .headers = good,
        .region = "r", .service = "s", .amz_date = "20150830T123600Z",
    };
    struct tm_aws_credentials cred;
    char *out = (char *)0x1;  /* must stay untouched on failure */

    cred_example(&cred, NULL);
    req.headers = nocolon;
    assert_int_equal(tm_sigv4_canonical_request(&req, &out), TM_EINVAL);
    req.headers = fold_first;
    assert_int_equal(tm_sigv4_canonical_request(&req, &out), TM_EINVAL);
    req.headers = empty_name;
    assert_int_equal(tm_sigv4_canonical_request(&req, &out), TM_EINVAL);
    req.headers = good;
    req.query = "a=%zz";
    assert_int_equal(tm_sigv4_canonical_request(&req, &out), TM_EINVAL);
    req.query = "a=%4";
    assert_int_equal(tm_sigv4_canonical_request(&req, &out), TM_EINVAL);
    req.query = NULL;
    req.amz_date = "2015-08-30";
    assert_int_equal(tm_sigv4_authorization(&req, &cred, &out), TM_EINVAL);
    req.amz_date = "20150830T123600Z";
    req.region = "us-east-1/evil";
    assert_int_equal(tm_sigv4_authorization(&req, &cred, &out), TM_EINVAL);
    req.region = "r";
    req.path = "relative";
    assert_int_equal(tm_sigv4_canonical_request(&req, &out), TM_EINVAL);
    req.path = "/";
    cred.access_key[0] = '\0';
    assert_int_equal(tm_sigv4_authorization(&req, &cred, &out), TM_EINVAL);
    assert_ptr_equal(out, (char *)0x1);
}

/*
 * No secret leaves through any path but the signature: the outputs of every
 * stage, the EC2 header lines and anything logged (the signer logs nothing,
 * so the log stream must stay empty) are searched for the secret key.
 */
static void test_secret_hygiene(void **state)
{
    static const char *bad_urls[] = {"ftp://x", "http://", "http://u:p@h/", "http://h/#f", "http://h h/"};
    char logbuf[4096] = {0};
    FILE *log = fmemopen(logbuf, sizeof(logbuf) - 1, "w");
    struct tm_aws_credentials cred;
    char **hdrs = NULL;
    char *out = NULL;

    assert_non_null(log);
    tm_log_set_stream(log);
    cred_example(&cred, "TOKEN/with+chars==");
    assert_int_equal(tm_sigv4_sign_ec2_post("https://ec2.us-east-1.amazonaws.com", "us-east-1",
                                            "Action=DescribeInstances", 24, "20150830T123600Z",
                                            &cred, &hdrs), 0);
    for (char **h = hdrs; *h; h++)
        assert_null(strstr(*h, EXAMPLE_SK));
    tm_sigv4_headers_free(hdrs);
    for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++) {
        hdrs = NULL;
        assert_int_equal(tm_sigv4_sign_ec2_post(bad_urls[i], "us-east-1", "", 0,
                                                "20150830T123600Z", &cred, &hdrs), TM_EINVAL);
        assert_null(hdrs);
    }
    /* A secret that does not fit (no NUL) is refused, not read past. */
    memset(cred.secret_key, 'S', sizeof(cred.secret_key));
    assert_int_equal(tm_sigv4_sign_ec2_post("https://h", "us-east-1", "", 0, "20150830T123600Z",
                                            &cred, &hdrs), TM_EINVAL);
    cred_example(&cred, NULL);
    {
        const char *headers[] = {"Host:h", NULL};
        struct tm_sigv4_request req = {
            .method = "GET", .path = "/", .headers = headers,
            .region = "r", .service = "s", .amz_date = "20150830T123600Z",
        };

        assert_int_equal(tm_sigv4_authorization(&req, &cred, &out), 0);
        assert_null(strstr(out, EXAMPLE_SK));
        free(out);
    }
    fflush(log);
    tm_log_set_stream(stderr);
    fclose(log);
    assert_null(strstr(logbuf, EXAMPLE_SK));
    assert_null(strstr(logbuf, "TOKEN/with"));
    tm_aws_credentials_clear(&cred);
    for (size_t i = 0; i < sizeof(cred); i++)
        assert_int_equal(((unsigned char *)&cred)[i], 0);
}

static void test_ec2_post(void **state)
{
    struct tm_aws_credentials cred;
    char **h = NULL;
    size_t n = 0;

    cred_example(&cred, NULL);
    assert_int_equal(tm_sigv4_sign_ec2_post("http://127.0.0.1:5000", "us-east-1", "Action=X", 8,
                                            "20150830T123600Z", &cred, &h), 0);
    while (h[n])
        n++;
    assert_int_equal(n, 4);
    assert_string_equal(h[0], "Content-Type: application/x-www-form-urlencoded; charset=utf-8");
    assert_string_equal(h[1], "Host: 127.0.0.1:5000");
    assert_string_equal(h[2], "X-Amz-Date: 20150830T123600Z");
    assert_true(strncmp(h[3], "Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/"
                              "us-east-1/ec2/aws4_request, SignedHeaders=content-type;host;"
                              "x-amz-date, Signature=", 132) == 0);
    tm_sigv4_headers_free(h);

    cred_example(&cred, "tok");
    assert_int_equal(tm_sigv4_sign_ec2_post("https://EC2.eu-west-1.amazonaws.com:443/", "eu-west-1",
                                            "", 0, "20150830T123600Z", &cred, &h), 0);
    assert_string_equal(h[1], "Host: ec2.eu-west-1.amazonaws.com");
    assert_string_equal(h[3], "X-Amz-Security-Token: tok");
    assert_non_null(strstr(h[4], "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token,"));
    assert_null(h[5]);
    tm_sigv4_headers_free(h);
    tm_sigv4_headers_free(NULL);
}

static void test_form_append(void **state)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;

    assert_int_equal(tm_aws_form_append(&buf, &len, &cap, "Action", "RunInstances"), 0);
    assert_int_equal(tm_aws_form_append(&buf, &len, &cap, "TagSpecification.1.Tag.1.Value",
                                        "a b+c/d=e&f~g_h-i.j*k'l\xc3\xa9"), 0);
    assert_int_equal(tm_aws_form_append_int(&buf, &len, &cap, "MinCount", 1), 0);
    assert_int_equal(tm_aws_form_append(&buf, &len, &cap, "Empty", ""), 0);
    assert_string_equal(buf, "Action=RunInstances&TagSpecification.1.Tag.1.Value="
                             "a%20b%2Bc%2Fd%3De%26f~g_h-i.j%2Ak%27l%C3%A9&MinCount=1&Empty=");
    assert_int_equal(len, strlen(buf));
    assert_int_equal(tm_aws_form_append(&buf, &len, &cap, NULL, "x"), TM_EINVAL);
    free(buf);
}

static void test_format_date(void **state)
{
    char d[17];

    tm_sigv4_format_date(1440938160000LL, d);
    assert_string_equal(d, "20150830T123600Z");
    tm_sigv4_format_date(1440938160999LL, d);
    assert_string_equal(d, "20150830T123600Z");
    tm_sigv4_format_date(0, d);
    assert_string_equal(d, "19700101T000000Z");
    tm_sigv4_format_date(4102444799000LL, d);
    assert_string_equal(d, "20991231T235959Z");
}

/*
 * The botocore cross-check driver.  Input lines:
 *   {"url":..., "region":..., "date":..., "ak":..., "sk":..., "token":...|null,
 *    "params":[[k, v], ...]}
 * Output lines: {"body": form body built with tm_aws_form_append,
 *                "headers": [lines from tm_sigv4_sign_ec2_post]} or {"error": code}.
 */
static int sign_stdin(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;

    while ((n = getline(&line, &cap, stdin)) > 0) {
        cJSON *in = cJSON_ParseWithLength(line, (size_t)n), *out = cJSON_CreateObject();
        const cJSON *url = cJSON_GetObjectItem(in, "url"), *region = cJSON_GetObjectItem(in, "region"),
                    *date = cJSON_GetObjectItem(in, "date"), *ak = cJSON_GetObjectItem(in, "ak"),
                    *sk = cJSON_GetObjectItem(in, "sk"), *tok = cJSON_GetObjectItem(in, "token"),
                    *params = cJSON_GetObjectItem(in, "params"), *p;
        struct tm_aws_credentials cred = {0};
        char *body = NULL, **hdrs = NULL, *text;
        size_t blen = 0, bcap = 0;
        int r = 0;

        if (!in || !out || !cJSON_IsString(url) || !cJSON_IsString(region) || !cJSON_IsString(date) ||
            !cJSON_IsString(ak) || !cJSON_IsString(sk) || !cJSON_IsArray(params)) {
            fprintf(stderr, "sign-stdin: bad input line\n");
            rc = 2;
            cJSON_Delete(in);
            cJSON_Delete(out);
            break;
        }
        snprintf(cred.access_key, sizeof(cred.access_key), "%s", ak->valuestring);
        snprintf(cred.secret_key, sizeof(cred.secret_key), "%s", sk->valuestring);
        if (cJSON_IsString(tok))
            snprintf(cred.session_token, sizeof(cred.session_token), "%s", tok->valuestring);
        cJSON_ArrayForEach(p, params) {
            const cJSON *k = cJSON_GetArrayItem(p, 0), *v = cJSON_GetArrayItem(p, 1);

            if (!cJSON_IsString(k) || !cJSON_IsString(v)) {
                r = TM_EINVAL;
                break;
            }
            r = tm_aws_form_append(&body, &blen, &bcap, k->valuestring, v->valuestring);
            if (r < 0)
                break;
        }
        if (r == 0)
            r = tm_sigv4_sign_ec2_post(url->valuestring, region->valuestring, body ? body : "",
                                       blen, date->valuestring, &cred, &hdrs);
        if (r < 0) {
            cJSON_AddNumberToObject(out, "error", r);
        } else {
            cJSON *arr = cJSON_AddArrayToObject(out, "headers");

            cJSON_AddStringToObject(out, "body", body ? body : "");
            for (char **h = hdrs; *h; h++)
                cJSON_AddItemToArray(arr, cJSON_CreateString(*h));
        }
        text = cJSON_PrintUnformatted(out);
        if (text)
            printf("%s\n", text);
        fflush(stdout);
        free(text);
        free(body);
        tm_sigv4_headers_free(hdrs);
        tm_aws_credentials_clear(&cred);
        cJSON_Delete(in);
        cJSON_Delete(out);
    }
    free(line);
    return rc;
}

/*
 * S3: the two signed examples of Amazon S3's SigV4 documentation
 * ("Signature Calculations for the Authorization Header: Transferring
 * Payload in a Single Chunk"): a ranged GET and a PUT whose key holds a '$'
 * (signed as sent, %24, not encoded twice).
 */
static void test_s3_documented(void **state)
{
    struct tm_aws_credentials cred = {0};
    char hash[65], **h = NULL;
    const char *get_extra[] = {"Range:bytes=0-9", NULL};
    const char *put_extra[] = {"Date:Fri, 24 May 2013 00:00:00 GMT",
                               "x-amz-storage-class:REDUCED_REDUNDANCY", NULL};
    const char *put_body = "Welcome to Amazon S3.";
    const char *authz = NULL;

    (void)state;
    strcpy(cred.access_key, "AKIAIOSFODNN7EXAMPLE");
    strcpy(cred.secret_key, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
    assert_int_equal(tm_sigv4_sha256_hex(NULL, 0, hash), 0);
    assert_int_equal(tm_sigv4_sign_s3(&(struct tm_sigv4_s3_request){
                                          .method = "GET",
                                          .endpoint_url = "https://examplebucket.s3.amazonaws.com",
                                          .path = "/test.txt",
                                          .extra = get_extra,
                                          .payload_hash = hash,
                                          .region = "us-east-1",
                                          .amz_date = "20130524T000000Z",
                                      },
                                      &cred, &h),
                     0);
    for (char **l = h; *l; l++) {
        if (!strncmp(*l, "Authorization: ", 15))
            authz = *l + 15;
    }
    assert_non_null(authz);
    assert_string_equal(authz, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                               "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                               "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    assert_string_equal(h[0], "Host: examplebucket.s3.amazonaws.com");
    assert_string_equal(h[3], "Range: bytes=0-9");
    tm_sigv4_headers_free(h);

    assert_int_equal(tm_sigv4_sha256_hex(put_body, strlen(put_body), hash), 0);
    assert_string_equal(hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
    assert_int_equal(tm_sigv4_sign_s3(&(struct tm_sigv4_s3_request){
                                          .method = "PUT",
                                          .endpoint_url = "https://examplebucket.s3.amazonaws.com",
                                          .path = "/test%24file.text",
                                          .extra = put_extra,
                                          .payload_hash = hash,
                                          .region = "us-east-1",
                                          .amz_date = "20130524T000000Z",
                                      },
                                      &cred, &h),
                     0);
    authz = NULL;
    for (char **l = h; *l; l++) {
        if (!strncmp(*l, "Authorization: ", 15))
            authz = *l + 15;
    }
    assert_non_null(authz);
    assert_non_null(strstr(authz, "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;"
                                  "x-amz-storage-class, Signature="
                                  "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"));
    tm_sigv4_headers_free(h);

    /* What an encoder would never make is refused, not signed differently
     * from what goes on the wire. */
    assert_int_equal(tm_sigv4_sign_s3(&(struct tm_sigv4_s3_request){
                                          .method = "GET",
                                          .endpoint_url = "http://127.0.0.1:9000",
                                          .path = "/b/a b",
                                          .payload_hash = hash,
                                          .region = "us-east-1",
                                          .amz_date = "20130524T000000Z",
                                      },
                                      &cred, &h),
                     TM_EINVAL);
    assert_int_equal(tm_sigv4_sign_s3(&(struct tm_sigv4_s3_request){
                                          .method = "GET",
                                          .endpoint_url = "http://127.0.0.1:9000/prefix",
                                          .path = "/b/k",
                                          .payload_hash = hash,
                                          .region = "us-east-1",
                                          .amz_date = "20130524T000000Z",
                                      },
                                      &cred, &h),
                     TM_EINVAL);
    assert_int_equal(tm_sigv4_sign_s3(&(struct tm_sigv4_s3_request){
                                          .method = "GET",
                                          .endpoint_url = "http://127.0.0.1:9000",
                                          .path = "/b/k",
                                          .payload_hash = "not-a-hash",
                                          .region = "us-east-1",
                                          .amz_date = "20130524T000000Z",
                                      },
                                      &cred, &h),
                     TM_EINVAL);
    {
        char *enc = NULL;

        assert_int_equal(tm_sigv4_uri_encode("logs/a b/$~é", true, &enc), 0);
        assert_string_equal(enc, "logs/a%20b/%24~%C3%A9");
        free(enc);
        assert_int_equal(tm_sigv4_uri_encode("a/b", false, &enc), 0);
        assert_string_equal(enc, "a%2Fb");
        free(enc);
    }
    tm_aws_credentials_clear(&cred);
}

/*
 * The S3 half of the botocore cross-check (tests/lib/sigv4_s3_botocore.py).
 * Input lines: {"method", "url" (endpoint), "bucket", "key" (or null),
 * "query" (wire query or null), "extra": ["Name:value"...], "body_hex",
 * "region", "date", "ak", "sk", "token"}.  The key is encoded with
 * tm_sigv4_uri_encode() as io/s3.c does.  Output: {"path": wire path,
 * "headers": [...]} or {"error": code}.
 */
static int sign_s3_stdin(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;

    while ((n = getline(&line, &cap, stdin)) > 0) {
        cJSON *in = cJSON_ParseWithLength(line, (size_t)n), *out = cJSON_CreateObject();
        const cJSON *method = cJSON_GetObjectItem(in, "method"), *url = cJSON_GetObjectItem(in, "url"),
                    *bucket = cJSON_GetObjectItem(in, "bucket"), *key = cJSON_GetObjectItem(in, "key"),
                    *query = cJSON_GetObjectItem(in, "query"), *extra = cJSON_GetObjectItem(in, "extra"),
                    *bhex = cJSON_GetObjectItem(in, "body_hex"),
                    *region = cJSON_GetObjectItem(in, "region"), *date = cJSON_GetObjectItem(in, "date"),
                    *ak = cJSON_GetObjectItem(in, "ak"), *sk = cJSON_GetObjectItem(in, "sk"),
                    *tok = cJSON_GetObjectItem(in, "token"), *e;
        struct tm_aws_credentials cred = {0};
        const char *lines[17] = {0};
        unsigned char *body = NULL;
        size_t blen = 0, ne = 0;
        char hash[65], path[4096], *enc = NULL, **hdrs = NULL, *text;
        int r = 0;

        if (!in || !out || !cJSON_IsString(method) || !cJSON_IsString(url) ||
            !cJSON_IsString(bucket) || !cJSON_IsString(bhex) || !cJSON_IsString(region) ||
            !cJSON_IsString(date) || !cJSON_IsString(ak) || !cJSON_IsString(sk) ||
            !cJSON_IsArray(extra)) {
            fprintf(stderr, "sign-s3-stdin: bad input line\n");
            rc = 2;
            cJSON_Delete(in);
            cJSON_Delete(out);
            break;
        }
        snprintf(cred.access_key, sizeof(cred.access_key), "%s", ak->valuestring);
        snprintf(cred.secret_key, sizeof(cred.secret_key), "%s", sk->valuestring);
        if (cJSON_IsString(tok))
            snprintf(cred.session_token, sizeof(cred.session_token), "%s", tok->valuestring);
        cJSON_ArrayForEach(e, extra) {
            if (cJSON_IsString(e) && ne < 16)
                lines[ne++] = e->valuestring;
        }
        blen = strlen(bhex->valuestring) / 2;
        body = malloc(blen + 1);
        for (size_t i = 0; body && i < blen; i++) {
            unsigned v = 0;

            sscanf(bhex->valuestring + 2 * i, "%2x", &v);
            body[i] = (unsigned char)v;
        }
        if (cJSON_IsString(key))
            r = tm_sigv4_uri_encode(key->valuestring, true, &enc);
        snprintf(path, sizeof(path), "/%s%s%s", bucket->valuestring, enc ? "/" : "", enc ? enc : "");
        if (r == 0)
            r = tm_sigv4_sha256_hex(body, blen, hash);
        if (r == 0)
            r = tm_sigv4_sign_s3(&(struct tm_sigv4_s3_request){
                                     .method = method->valuestring,
                                     .endpoint_url = url->valuestring,
                                     .path = path,
                                     .query = cJSON_IsString(query) ? query->valuestring : NULL,
                                     .extra = lines,
                                     .payload_hash = hash,
                                     .region = region->valuestring,
                                     .amz_date = date->valuestring,
                                 },
                                 &cred, &hdrs);
        if (r < 0) {
            cJSON_AddNumberToObject(out, "error", r);
        } else {
            cJSON *arr = cJSON_AddArrayToObject(out, "headers");

            cJSON_AddStringToObject(out, "path", path);
            for (char **h = hdrs; *h; h++)
                cJSON_AddItemToArray(arr, cJSON_CreateString(*h));
        }
        text = cJSON_PrintUnformatted(out);
        if (text)
            printf("%s\n", text);
        fflush(stdout);
        free(text);
        free(enc);
        free(body);
        tm_sigv4_headers_free(hdrs);
        tm_aws_credentials_clear(&cred);
        cJSON_Delete(in);
        cJSON_Delete(out);
    }
    free(line);
    return rc;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suite_vectors),
        cmocka_unit_test(test_vector_mutations),
        cmocka_unit_test(test_canonical_details),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_secret_hygiene),
        cmocka_unit_test(test_ec2_post),
        cmocka_unit_test(test_form_append),
        cmocka_unit_test(test_format_date),
        cmocka_unit_test(test_s3_documented),
    };

    if (argc > 1 && strcmp(argv[1], "--sign-stdin") == 0)
        return sign_stdin();
    if (argc > 1 && strcmp(argv[1], "--sign-s3-stdin") == 0)
        return sign_s3_stdin();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
