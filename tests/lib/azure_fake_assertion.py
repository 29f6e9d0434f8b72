"""The Azure fake's check of a certificate client assertion (RFC 7523 as the
Microsoft identity platform applies it: "Microsoft identity platform
application authentication certificate credentials").  Used by
azure_fake.py; no network, python3 cryptography only.

verify() answers None when the assertion is good, else (http_status, error,
description, violation): violation is True when the fault is the client's
code (a malformed assertion, a wrong aud/iss/sub, a reused jti, a wrong
grant), False when it is the credential (a certificate the app has not
registered, a signature another key made, an expired assertion), which is
what a test provokes on purpose.  The AADSTS codes are the service's:
700027 (certificate not registered / invalid signature), 700024 (not within
its valid time range), 700021 (application identifier does not match
client_id); AADSTS50027 (malformed JWT) stands for the rest.
"""
import base64
import json
import time

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
SKEW = 300  # seconds of clock skew the service allows


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class Registry:
    """The certificates registered on the app (the portal's "Certificates
    & secrets"), by both thumbprints."""

    def __init__(self):
        self.by_x5t = {}
        self.by_s256 = {}

    def add_pem(self, pem_bytes):
        for block in pem_bytes.split(b"-----END CERTIFICATE-----")[:-1]:
            cert = x509.load_pem_x509_certificate(block + b"-----END CERTIFICATE-----\n")
            self.by_x5t[b64url(cert.fingerprint(hashes.SHA1()))] = cert
            self.by_s256[b64url(cert.fingerprint(hashes.SHA256()))] = cert

    def __bool__(self):
        return bool(self.by_x5t)


def _bad(status, error, desc, violation):
    return (status, error, desc, violation)


def verify(form, registry, client_id, audience, seen_jtis, now=None):
    """form: the token request's fields.  seen_jtis: a set, updated."""
    now = time.time() if now is None else now
    if "client_secret" in form:
        return _bad(400, "invalid_request", "AADSTS90023: a client_secret and a client_assertion "
                    "in one request", True)
    if form.get("client_assertion_type") != ASSERTION_TYPE:
        return _bad(400, "invalid_request", "AADSTS90014: client_assertion_type must be "
                    + ASSERTION_TYPE, True)
    parts = form.get("client_assertion", "").split(".")
    if len(parts) != 3:
        return _bad(400, "invalid_request", "AADSTS50027: JWT token is invalid or malformed.", True)
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        sig = b64url_decode(parts[2])
    except (ValueError, json.JSONDecodeError):
        return _bad(400, "invalid_request", "AADSTS50027: JWT token is invalid or malformed.", True)
    if not isinstance(header, dict) or not isinstance(claims, dict):
        return _bad(400, "invalid_request", "AADSTS50027: JWT header or claims not an object.", True)
    alg = header.get("alg")
    if alg not in ("RS256", "PS256"):
        return _bad(400, "invalid_request", f"AADSTS50027: unsupported alg {alg!r}.", True)
    if header.get("typ", "JWT") != "JWT":
        return _bad(400, "invalid_request", "AADSTS50027: typ must be JWT.", True)
    x5t, s256 = header.get("x5t"), header.get("x5t#S256")
    if not x5t and not s256:
        return _bad(400, "invalid_request", "AADSTS50027: no x5t or x5t#S256 in the header.", True)
    # Both given: both must name the same registered certificate.
    cert = registry.by_s256.get(s256) if s256 else registry.by_x5t.get(x5t)
    if cert is not None and x5t and s256 and registry.by_x5t.get(x5t) is not cert:
        return _bad(400, "invalid_request", "AADSTS50027: x5t and x5t#S256 name different "
                    "certificates.", True)
    if cert is None:
        return _bad(401, "invalid_client",
                    "AADSTS700027: The certificate with identifier used to sign the client "
                    f"assertion is not registered on application. [Reason - The key was not "
                    f"found., Thumbprint of key used by client: '{s256 or x5t}']", False)
    signed = (parts[0] + "." + parts[1]).encode()
    pad = (padding.PKCS1v15() if alg == "RS256"
           else padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32))
    try:
        cert.public_key().verify(sig, signed, pad, hashes.SHA256())
    except InvalidSignature:
        return _bad(401, "invalid_client", "AADSTS700027: Client assertion contains an invalid "
                    "signature. [Reason - The key was not found.]", False)
    for k in ("aud", "iss", "sub", "jti", "exp", "nbf"):
        if k not in claims:
            return _bad(400, "invalid_request", f"AADSTS50027: claim {k} missing.", True)
    if claims["aud"] != audience:
        return _bad(401, "invalid_client", f"AADSTS50027: aud {claims['aud']!r} is not the "
                    f"token endpoint {audience!r}.", True)
    if claims["iss"] != client_id or claims["sub"] != client_id or form.get("client_id") != client_id:
        return _bad(401, "invalid_client", "AADSTS700021: Client assertion application "
                    "identifier doesn't match 'client_id' parameter.", True)
    exp, nbf = claims["exp"], claims["nbf"]
    if not isinstance(exp, int) or not isinstance(nbf, int) or isinstance(exp, bool):
        return _bad(400, "invalid_request", "AADSTS50027: exp and nbf must be integers.", True)
    if exp <= now - SKEW or nbf > now + SKEW:
        return _bad(401, "invalid_client", "AADSTS700024: Client assertion is not within its "
                    "valid time range.", False)
    if exp - nbf > 3600:
        return _bad(401, "invalid_client", "AADSTS700024: Client assertion lifetime longer "
                    "than an hour.", True)
    if claims["jti"] in seen_jtis:
        return _bad(401, "invalid_client", "AADSTS50027: jti replayed.", True)
    seen_jtis.add(claims["jti"])
    return None


def describe(assertion):
    """The names a reference comparison looks at: header keys, claim keys,
    alg and the claims' lifetime."""
    h, c, _ = assertion.split(".")
    header = json.loads(b64url_decode(h))
    claims = json.loads(b64url_decode(c))
    return {"header": sorted(header), "claims": sorted(claims), "alg": header.get("alg"),
            "lifetime": claims.get("exp", 0) - claims.get("nbf", 0)}
