/*
 * tests/fuzz/fuzz_sigv4.c: libFuzzer target for the SigV4 canonicaliser.
 *
 * The input is a raw HTTP request in the AWS suite's .req shape: a request
 * line "METHOD PATH[?QUERY] HTTP/1.1", header lines (folded lines start
 * with a space), an empty line, the body.  It goes through all three
 * stages, then the pieces go one by one into the form encoder and the EC2
 * signer (the request line's path as an endpoint URL).  The checks are the
 * API's promises: only 0, TM_EINVAL or TM_ENOMEM; outputs only on success;
 * an Authorization of the documented shape; no secret in any output.
 *
 * Built two ways, as fuzz_config.c is: a libFuzzer target (TM_FUZZ=ON,
 * clang) and, with TM_FUZZ_REPLAY, a plain program that replays every file
 * of tests/fuzz/corpus/sigv4 on every ctest run.
 */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/sigv4.h"

#define FUZZ_SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define MAX_LINES 600

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rc(int r, const void *out)
{
    if (r != 0 && r != TM_EINVAL && r != TM_ENOMEM)
        abort();
    if (r != 0 && out)
        abort();  /* ret_* written on failure */
}

static void check_authz(const char *a)
{
    const char *sig = strstr(a, ", Signature=");
    size_t n = strlen(a);

    if (strncmp(a, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/", 40) != 0 || !sig ||
        strlen(sig + 12) != 64 || strstr(a, FUZZ_SECRET))
        abort();
    for (size_t i = n - 64; i < n; i++) {
        if (!isxdigit((unsigned char)a[i]) || isupper((unsigned char)a[i]))
            abort();
    }
}

static void sign_pieces(char *method, char *path, char *query, const char **headers,
                        const char *body, size_t body_len)
{
    struct tm_aws_credentials cred = {0};
    struct tm_sigv4_request req = {
        .method = method, .path = path, .query = query, .headers = headers,
        .payload = body, .payload_len = body_len,
        .region = "us-east-1", .service = "service", .amz_date = "20150830T123600Z",
    };
    char *creq = NULL, *sts = NULL, *authz = NULL, **hdrs = NULL;
    char *form = NULL;
    size_t flen = 0, fcap = 0;
    int r;

    snprintf(cred.access_key, sizeof(cred.access_key), "AKIDEXAMPLE");
    snprintf(cred.secret_key, sizeof(cred.secret_key), FUZZ_SECRET);
    r = tm_sigv4_canonical_request(&req, &creq);
    check_rc(r, creq);
    if (r == 0) {
        r = tm_sigv4_string_to_sign(&req, creq, &sts);
        check_rc(r, sts);
        if (r != 0 || strncmp(sts, "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n", 72))
            abort();
    }
    r = tm_sigv4_authorization(&req, &cred, &authz);
    check_rc(r, authz);
    if ((r == 0) != (creq != NULL))
        abort();  /* stage 3 fails exactly when stage 1 does */
    if (r == 0)
        check_authz(authz);

    /* The same bytes as form fields and as an endpoint URL. */
    r = tm_aws_form_append(&form, &flen, &fcap, method, path);
    check_rc(r, NULL);
    if (r == 0)
        r = tm_aws_form_append(&form, &flen, &fcap, query ? query : "", body ? body : "");
    check_rc(r, NULL);
    if (form) {
        for (size_t i = 0; i < flen; i++) {
            if (!isalnum((unsigned char)form[i]) && !strchr("-_.~%=&", form[i]))
                abort();
        }
    }
    snprintf(cred.session_token, sizeof(cred.session_token), "%s", method);
    r = tm_sigv4_sign_ec2_post(path, "us-east-1", form ? form : "", flen, "20150830T123600Z",
                               &cred, &hdrs);
    check_rc(r, hdrs);
    if (r == 0) {
        size_t n = 0;

        for (; hdrs[n]; n++) {
            /* The token is the input's method here, so it may hold anything
             * but a line break; only the token line may show it. */
            if (strpbrk(hdrs[n], "\r\n") ||
                (strstr(hdrs[n], FUZZ_SECRET) && strncmp(hdrs[n], "X-Amz-Security-Token: ", 22)))
                abort();
        }
        if (n < 4 || strncmp(hdrs[n - 1], "Authorization: ", 15))
            abort();
        check_authz(hdrs[n - 1] + 15);
    }
    tm_sigv4_headers_free(hdrs);
    free(form);
    free(creq);
    free(sts);
    free(authz);
    tm_aws_credentials_clear(&cred);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    const char *headers[MAX_LINES + 1];
    char *p, *eol, *sp, *ver, *method, *path, *query = NULL, *body;
    size_t nh = 0;

    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    p = text;
    eol = strchr(p, '\n');
    if (eol)
        *eol = '\0';
    method = p;
    sp = strchr(p, ' ');
    path = "/";
    if (sp) {
        *sp = '\0';
        path = sp + 1;
        ver = strstr(path, " HTTP/");
        if (ver)
            *ver = '\0';
        query = strchr(path, '?');
        if (query)
            *query++ = '\0';
    }
    body = text + size;
    p = eol ? eol + 1 : text + size;
    while (p < text + size && nh < MAX_LINES) {
        eol = strchr(p, '\n');
        if (eol)
            *eol = '\0';
        if (*p == '\0') {
            body = eol ? eol + 1 : p;
            break;
        }
        headers[nh++] = p;
        if (!eol)
            break;
        p = eol + 1;
    }
    headers[nh] = NULL;
    sign_pieces(method, path, query, headers, body, (size_t)(text + size - body));
    free(text);
    return 0;
}

#ifdef TM_FUZZ_REPLAY
#include "tests/fuzz/replay_main.h"
#endif
