#!/usr/bin/env python3
"""A loopback fake of Azure Resource Manager (Microsoft.Compute VMs) and of the
Microsoft identity platform, over HTTPS, strict about what it accepts.

Usage: azure_fake.py --cert CERT --key KEY [--state-dir DIR] [--tenant T]
                     [--client-id ID] [--secret-env NAME] [--location L]
                     [--client-cert PEM ...]

Binds 127.0.0.1 on a free port, prints "AZURE_FAKE_PORT=N" then
"AZURE_FAKE_READY" on stdout, and serves until killed.

What it checks (a request the real API would reject fails here too, with
the status ARM would give, and is recorded as a violation the test reads
from GET /__fake/violations):
  * routes and methods: the operations of the official swagger extract
    ../shared/specs/azure-compute/compute-2024-07-01.autoscaler-extract.json,
    plus three ARM-wide routes the extract does not hold (the async
    operation status, Resource SKUs, and the identity endpoints);
  * required query parameters (api-version on every ARM call, a version ARM
    knows), and no query parameter the operation does not declare;
  * every body key of a VM PUT a property of its schema (SCHEMA below: the
    extract's definitions verbatim for priority, evictionPolicy,
    BillingProfile, ScheduledEventsProfile; the rest of VirtualMachine as the
    public 2024-07-01 swagger has it), enums valid, types right, and the
    rules ARM enforces across keys (evictionPolicy and billingProfile only for
    Spot, a Linux VM without a password needs an SSH key, customData base64
    and at most 87380 characters, zones 1..3, location the region, names
    within limits, no change of zone on an existing VM);
  * a bearer token this fake issued and that has not expired, on every ARM
    call (401 InvalidAuthenticationToken otherwise).

What it simulates: client-credentials tokens (OpenID discovery, token
endpoint, wrong secret -> 401 invalid_client; or a certificate's client
assertion, verified against the --client-cert certificates: RS256/PS256
signature, x5t / x5t#S256, aud = the token endpoint, iss = sub = client id,
exp/nbf, a fresh jti; a certificate not registered or a signature another key
made -> 401 invalid_client AADSTS700027, see azure_fake_assertion.py),
managed identity (IMDS route),
long-running PUT and DELETE (201/202 + Azure-AsyncOperation + Location, the
operation InProgress for --op-delay seconds), per (size, zone, priority)
capacity (short -> ZonalAllocationFailed / SkuNotAvailable, sync or from the
operation, leaving a Failed VM as Azure does), eviction of spot VMs
(simulateEviction: Deleting, then gone with its NIC and disk), throttling
(429 + Retry-After), 5xx, and the NIC and OS disk each VM makes, deleted with
it only when their deleteOption says Delete (so orphans can be counted).

Control (no auth, test only): POST /__fake/control with JSON, e.g.
  {"capacity": {"Standard_NC24ads_A100_v4/1/Spot": 0}, "short_mode": "async",
   "throttle": 2, "fail5xx": 1, "op_delay": 0.3, "token_ttl": 3600,
   "page_size": 2, "put_hold": [0.25, 0.25], "delete_delay": 0.3}
GET /__fake/state: {"vms": {...}, "nics": [...], "disks": [...], "tokens": N,
  "requests": [...counts...]}; GET /__fake/violations: [...];
GET /__fake/assertions: the header and claim names of each client assertion.
"""
import argparse
import base64
import json
import os
import re
import secrets
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import azure_fake_assertion as assertion

HERE = os.path.dirname(os.path.abspath(__file__))
EXTRACT = None
LOCK = threading.RLock()
ARGS = None

KNOWN_API_VERSIONS = {"2023-03-01", "2023-09-01", "2024-03-01", "2024-07-01", "2024-11-01",
                      "2025-04-01", "2025-11-01", "2026-03-01"}
SKU_API_VERSIONS = {"2019-04-01", "2021-07-01"}
KNOWN_SIZES = {  # size -> zones offered in the fake's region
    "Standard_NC24ads_A100_v4": ["1", "2", "3"],
    "Standard_NC48ads_A100_v4": ["1", "2", "3"],
    "Standard_ND96asr_v4": ["1", "2"],
    "Standard_ND96amsr_A100_v4": ["1", "2", "3"],
    "Standard_ND96isr_H100_v5": ["1", "2", "3"],
    "Standard_NC40ads_H100_v5": ["1", "2", "3"],
    "Standard_D2s_v5": ["1", "2", "3"],
}

STATE = {
    "vms": {},          # name -> dict (the resource as GET returns it, plus _private)
    "nics": {},         # name -> owner vm
    "disks": {},        # name -> owner vm
    "ops": {},          # id -> {"status", "error", "done_at", "then"}
    "tokens": {},       # token -> expiry (epoch s)
    "violations": [],
    "counts": {},
    "tokens_issued": 0,
    "jtis": set(),      # every client assertion's jti (a replay is refused)
    "assertions": [],   # {"client", "accepted", "shape"} per assertion received
}
CTL = {
    "capacity": {},     # "size/zone/Priority" -> remaining count (absent: unlimited)
    "short_mode": "async",
    "throttle": 0,
    "fail5xx": 0,
    "op_delay": 0.3,
    "delete_delay": 0.3,
    "evict_delay": 1.0,
    "token_ttl": 3600,
    "page_size": 50,
    "put_hold": [0.0, 0.0],
    "quota_exceeded": False,  # new VMs refused as a core quota would
}

# ---- schema -----------------------------------------------------------------

def S(t, **kw):
    kw["type"] = t
    return kw


def OBJ(props, required=()):
    return {"type": "object", "properties": props, "required": list(required)}


def _ext(name):
    return EXTRACT["definitions"][name]


def build_schema():
    # Verbatim from the extract (computeRPCommon.json definitions).
    priority = _ext("priority")
    eviction = _ext("evictionPolicy")
    billing = dict(_ext("BillingProfile"), type="object")
    billing["properties"] = {"maxPrice": S("number")}
    term = _ext("TerminateNotificationProfile")
    osimg = _ext("OSImageNotificationProfile")
    sched = OBJ({"terminateNotificationProfile": term, "osImageNotificationProfile": osimg})
    # From the public 2024-07-01 swagger (virtualMachine.json / computeRPCommon.json),
    # restated for the keys a VM PUT may carry; readOnly members are listed as such.
    delete_option = S("string", enum=["Delete", "Detach"])
    sub_resource = OBJ({"id": S("string")})
    image_ref = OBJ({"publisher": S("string"), "offer": S("string"), "sku": S("string"),
                     "version": S("string"), "id": S("string"),
                     "sharedGalleryImageId": S("string"),
                     "communityGalleryImageId": S("string"),
                     "exactVersion": S("string", readOnly=True)})
    managed_disk = OBJ({"storageAccountType": S("string", enum=[
        "Standard_LRS", "Premium_LRS", "StandardSSD_LRS", "UltraSSD_LRS", "Premium_ZRS",
        "StandardSSD_ZRS", "PremiumV2_LRS"]), "id": S("string")})
    os_disk = OBJ({"osType": S("string", enum=["Windows", "Linux"]), "name": S("string"),
                   "caching": S("string", enum=["None", "ReadOnly", "ReadWrite"]),
                   "createOption": S("string", enum=["FromImage", "Empty", "Attach", "Copy",
                                                     "Restore"]),
                   "deleteOption": delete_option, "diskSizeGB": S("integer"),
                   "managedDisk": managed_disk, "writeAcceleratorEnabled": S("boolean")},
                  required=["createOption"])
    storage = OBJ({"imageReference": image_ref, "osDisk": os_disk,
                   "dataDisks": S("array", items=OBJ({})),
                   "diskControllerType": S("string", enum=["SCSI", "NVMe"])})
    ssh_key = OBJ({"path": S("string"), "keyData": S("string")})
    linux = OBJ({"disablePasswordAuthentication": S("boolean"),
                 "ssh": OBJ({"publicKeys": S("array", items=ssh_key)}),
                 "provisionVMAgent": S("boolean"),
                 "enableVMAgentPlatformUpdates": S("boolean")})
    os_profile = OBJ({"computerName": S("string"), "adminUsername": S("string"),
                      "adminPassword": S("string"), "customData": S("string"),
                      "linuxConfiguration": linux, "allowExtensionOperations": S("boolean"),
                      "requireGuestProvisionSignal": S("boolean")})
    ipconf = OBJ({"name": S("string"), "properties": OBJ({
        "subnet": sub_resource, "primary": S("boolean"),
        "privateIPAddressVersion": S("string", enum=["IPv4", "IPv6"]),
        "publicIPAddressConfiguration": OBJ({})})}, required=["name"])
    nic_conf = OBJ({"name": S("string"), "properties": OBJ({
        "primary": S("boolean"), "deleteOption": delete_option,
        "enableAcceleratedNetworking": S("boolean"), "enableIPForwarding": S("boolean"),
        "networkSecurityGroup": sub_resource,
        "ipConfigurations": S("array", items=ipconf)}, required=["ipConfigurations"])},
        required=["name"])
    nic_ref = OBJ({"id": S("string"), "properties": OBJ({"primary": S("boolean"),
                                                        "deleteOption": delete_option})})
    network = OBJ({"networkInterfaces": S("array", items=nic_ref),
                   "networkApiVersion": S("string", enum=["2020-11-01", "2022-11-01"]),
                   "networkInterfaceConfigurations": S("array", items=nic_conf)})
    props = OBJ({
        "hardwareProfile": OBJ({"vmSize": S("string")}),
        "storageProfile": storage,
        "osProfile": os_profile,
        "networkProfile": network,
        "priority": priority,
        "evictionPolicy": eviction,
        "billingProfile": billing,
        "scheduledEventsProfile": sched,
        "userData": S("string"),
        "diagnosticsProfile": OBJ({"bootDiagnostics": OBJ({"enabled": S("boolean"),
                                                           "storageUri": S("string")})}),
        "licenseType": S("string"),
        "provisioningState": S("string", readOnly=True),
        "vmId": S("string", readOnly=True),
        "instanceView": S("object", readOnly=True),
        "timeCreated": S("string", readOnly=True),
    })
    return OBJ({"location": S("string"), "tags": S("object", additionalProperties=S("string")),
                "zones": S("array", items=S("string")), "properties": props,
                "identity": OBJ({"type": S("string", enum=["SystemAssigned", "UserAssigned",
                                                           "SystemAssigned, UserAssigned",
                                                           "None"])}),
                "plan": OBJ({"name": S("string"), "publisher": S("string"),
                             "product": S("string")}),
                "id": S("string", readOnly=True), "name": S("string", readOnly=True),
                "type": S("string", readOnly=True), "etag": S("string", readOnly=True)},
               required=["location"])


SCHEMA = None


def validate(value, schema, path, errs):
    t = schema.get("type")
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{path}: {value!r} is not one of {schema['enum']}")
        return
    if t == "object" or "properties" in schema:
        if not isinstance(value, dict):
            errs.append(f"{path}: expected an object")
            return
        props = schema.get("properties")
        for k, v in value.items():
            if props is not None and k in props:
                validate(v, props[k], f"{path}.{k}", errs)
            elif "additionalProperties" in schema:
                validate(v, schema["additionalProperties"], f"{path}.{k}", errs)
            elif props is not None:
                errs.append(f"{path}.{k}: not a property of the schema")
        for r in schema.get("required", []):
            if r not in value:
                errs.append(f"{path}.{r}: required")
    elif t == "array":
        if not isinstance(value, list):
            errs.append(f"{path}: expected an array")
            return
        for i, v in enumerate(value):
            validate(v, schema.get("items", {}), f"{path}[{i}]", errs)
    elif t == "string":
        if not isinstance(value, str):
            errs.append(f"{path}: expected a string")
    elif t == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            errs.append(f"{path}: expected a number")
    elif t == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            errs.append(f"{path}: expected an integer")
    elif t == "boolean":
        if not isinstance(value, bool):
            errs.append(f"{path}: expected a boolean")


def vm_rules(name, body, errs):
    """Rules ARM enforces across keys of a VM PUT."""
    p = body.get("properties", {})
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]{0,62}[A-Za-z0-9]", name):
        errs.append(f"vmName {name!r}: 1-64 characters, letters, digits, '-' and '.'")
    if body.get("location") != ARGS.location:
        errs.append(f"location {body.get('location')!r}: the resource group is in {ARGS.location}")
    for z in body.get("zones", []):
        if z not in ("1", "2", "3"):
            errs.append(f"zones: {z!r} is not a zone of {ARGS.location}")
    if len(body.get("zones", [])) > 1:
        errs.append("zones: a VM takes at most one zone")
    size = p.get("hardwareProfile", {}).get("vmSize")
    if not size:
        errs.append("properties.hardwareProfile.vmSize: required")
    prio = p.get("priority", "Regular")
    if prio not in ("Spot", "Low"):
        if "evictionPolicy" in p:
            errs.append("properties.evictionPolicy: only for priority Spot")
        if "billingProfile" in p:
            errs.append("properties.billingProfile: only for priority Spot")
    else:
        mp = p.get("billingProfile", {}).get("maxPrice", -1)
        if mp != -1 and not (isinstance(mp, (int, float)) and mp > 0):
            errs.append("properties.billingProfile.maxPrice: -1 or greater than zero")
    st = p.get("storageProfile")
    if not st or "osDisk" not in st:
        errs.append("properties.storageProfile.osDisk: required to create a VM")
    elif st["osDisk"].get("createOption") == "FromImage" and "imageReference" not in st:
        errs.append("properties.storageProfile.imageReference: required with createOption FromImage")
    ir = (st or {}).get("imageReference", {})
    if ir and "id" not in ir and not all(k in ir for k in ("publisher", "offer", "sku", "version")):
        errs.append("properties.storageProfile.imageReference: publisher, offer, sku and version, or id")
    osp = p.get("osProfile")
    if not osp:
        errs.append("properties.osProfile: required when creating from an image")
    else:
        if not osp.get("adminUsername"):
            errs.append("properties.osProfile.adminUsername: required")
        cn = osp.get("computerName", name)
        if len(cn) > 64:
            errs.append("properties.osProfile.computerName: at most 64 characters")
        lc = osp.get("linuxConfiguration", {})
        if lc.get("disablePasswordAuthentication") and not lc.get("ssh", {}).get("publicKeys"):
            errs.append("properties.osProfile.linuxConfiguration.ssh.publicKeys: required when "
                        "password authentication is disabled")
        if not lc.get("disablePasswordAuthentication") and not osp.get("adminPassword"):
            errs.append("properties.osProfile.adminPassword: required unless password "
                        "authentication is disabled")
        for k in lc.get("ssh", {}).get("publicKeys", []):
            if not str(k.get("path", "")).startswith("/home/"):
                errs.append("ssh.publicKeys[].path: must be under /home/USER/.ssh")
        cd = osp.get("customData")
        if cd is not None:
            if len(cd) > 87380:
                errs.append("properties.osProfile.customData: at most 87380 characters")
            try:
                base64.b64decode(cd, validate=True)
            except Exception:
                errs.append("properties.osProfile.customData: not base64")
    net = p.get("networkProfile")
    if not net or not (net.get("networkInterfaces") or net.get("networkInterfaceConfigurations")):
        errs.append("properties.networkProfile: a VM needs a network interface")
    elif net.get("networkInterfaceConfigurations") and "networkApiVersion" not in net:
        errs.append("properties.networkProfile.networkApiVersion: required with "
                    "networkInterfaceConfigurations")
    for nc in (net or {}).get("networkInterfaceConfigurations", []):
        for ipc in nc.get("properties", {}).get("ipConfigurations", []):
            sid = ipc.get("properties", {}).get("subnet", {}).get("id", "")
            if not re.fullmatch(r"/subscriptions/[^/]+/resourceGroups/[^/]+/providers/"
                                r"Microsoft\.Network/virtualNetworks/[^/]+/subnets/[^/]+", sid):
                errs.append(f"subnet id {sid!r} is not a subnet resource id")
    return size, prio


# ---- routes -----------------------------------------------------------------

def compile_routes():
    routes = []
    for op in EXTRACT["operations"]:
        rx = "^" + re.sub(r"\{([^}]+)\}", r"(?P<\1>[^/]+)", op["path"]) + "$"
        q = op.get("query", {"api-version": "required"})
        allowed = set(q.keys()) | {"api-version"}
        if op.get("pageable"):
            allowed.add("$skiptoken")
        routes.append((op["method"], re.compile(rx), op["operationId"], allowed))
    # ARM-wide routes the extract does not hold.
    routes.append(("GET", re.compile(r"^/subscriptions/(?P<subscriptionId>[^/]+)/providers/"
                                     r"Microsoft\.Compute/locations/(?P<location>[^/]+)/"
                                     r"operations/(?P<operationId>[^/]+)$"),
                   "AsyncOperation_Get", {"api-version"}))
    routes.append(("GET", re.compile(r"^/subscriptions/(?P<subscriptionId>[^/]+)/providers/"
                                     r"Microsoft\.Compute/skus$"),
                   "ResourceSkus_List", {"api-version", "$filter", "includeExtendedLocations"}))
    return routes


ROUTES = None


def now():
    return time.time()


def count(name):
    STATE["counts"][name] = STATE["counts"].get(name, 0) + 1


def vm_view(vm):
    return {k: v for k, v in vm.items() if not k.startswith("_")}


def tick():
    """Advance every simulated clock: operations finish, VMs change state."""
    t = now()
    for oid, op in list(STATE["ops"].items()):
        if op["status"] == "InProgress" and t >= op["done_at"]:
            op["then"]()
    for name, vm in list(STATE["vms"].items()):
        if vm.get("_gone_at") and t >= vm["_gone_at"]:
            remove_vm(name)


def remove_vm(name):
    vm = STATE["vms"].pop(name, None)
    if not vm:
        return
    if vm["_nic_delete"]:
        STATE["nics"].pop(vm["_nic"], None)
    if vm["_disk_delete"]:
        STATE["disks"].pop(vm["_disk"], None)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, obj=None, headers=None, raw=None):
        body = raw if raw is not None else (b"" if obj is None else json.dumps(obj).encode())
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-ms-request-id", secrets.token_hex(8))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(body)

    def cloud_error(self, code, err, msg, headers=None):
        self.reply(code, {"error": {"code": err, "message": msg}}, headers)

    def violation(self, status, code, msg):
        with LOCK:
            STATE["violations"].append(f"{self.command} {self.path_only}: {msg}")
        self.cloud_error(status, code, msg)

    def base(self):
        return f"https://127.0.0.1:{self.server.server_address[1]}"

    # -- entry points --
    def do_GET(self):
        self.handle_any()

    def do_POST(self):
        self.handle_any()

    def do_PUT(self):
        self.handle_any()

    def do_DELETE(self):
        self.handle_any()

    def do_PATCH(self):
        self.handle_any()

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(n) if n else b""
        u = urllib.parse.urlsplit(self.path)
        self.path_only = u.path
        self.query = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        print(f"{self.command} {u.path}", file=sys.stderr, flush=True)
        with LOCK:
            tick()
        if u.path.startswith("/__fake/"):
            return self.control(u.path)
        if u.path.startswith("/metadata/identity/oauth2/token"):
            return self.imds_token()
        m = re.fullmatch(r"/([^/]+)/v2\.0/\.well-known/openid-configuration", u.path)
        if m:
            return self.discovery(m.group(1))
        m = re.fullmatch(r"/([^/]+)/oauth2/v2\.0/token", u.path)
        if m:
            return self.token(m.group(1))
        return self.arm()

    # -- test control --
    def control(self, path):
        with LOCK:
            if path == "/__fake/control" and self.command == "POST":
                CTL.update(json.loads(self.body or b"{}"))
                return self.reply(200, CTL)
            if path == "/__fake/state":
                return self.reply(200, {
                    "vms": {k: vm_view(v) for k, v in STATE["vms"].items()},
                    "nics": sorted(STATE["nics"]), "disks": sorted(STATE["disks"]),
                    "tokens_issued": STATE["tokens_issued"], "counts": STATE["counts"]})
            if path == "/__fake/tokens":  # every token issued, one a line (the grep test)
                body = "".join(t + "\n" for t in STATE["tokens"]).encode()
                return self.reply(200, raw=body)
            if path == "/__fake/puts":  # every VM PUT body as received
                return self.reply(200, STATE.get("puts", []))
            if path == "/__fake/assertions":  # the shape of every client assertion received
                return self.reply(200, STATE["assertions"])
            if path == "/__fake/violations":
                return self.reply(200, STATE["violations"])
            if path == "/__fake/expire_tokens" and self.command == "POST":
                for t in STATE["tokens"]:
                    STATE["tokens"][t] = 0
                return self.reply(200, {})
        return self.reply(404, {"error": "no such control"})

    # -- identity platform --
    def discovery(self, tenant):
        if self.command != "GET":
            return self.violation(405, "MethodNotAllowed", "discovery is GET")
        if tenant != ARGS.tenant:
            return self.reply(400, {"error": "invalid_tenant",
                                    "error_description": f"AADSTS90002: Tenant '{tenant}' not found."})
        b = self.base()
        self.reply(200, {"token_endpoint": f"{b}/{tenant}/oauth2/v2.0/token",
                         "authorization_endpoint": f"{b}/{tenant}/oauth2/v2.0/authorize",
                         "issuer": f"{b}/{tenant}/v2.0",
                         "jwks_uri": f"{b}/{tenant}/discovery/v2.0/keys",
                         "end_session_endpoint": f"{b}/{tenant}/oauth2/v2.0/logout",
                         "token_endpoint_auth_methods_supported": ["client_secret_post",
                                                                   "private_key_jwt"]})

    def issue(self, extra=None):
        tok = "fake-" + secrets.token_urlsafe(24)
        with LOCK:
            STATE["tokens"][tok] = now() + CTL["token_ttl"]
            STATE["tokens_issued"] += 1
        d = {"token_type": "Bearer", "expires_in": CTL["token_ttl"], "access_token": tok}
        d.update(extra or {})
        return d

    def token(self, tenant):
        if self.command != "POST":
            return self.violation(405, "MethodNotAllowed", "the token endpoint takes POST")
        ctype = self.headers.get("Content-Type", "")
        if not ctype.startswith("application/x-www-form-urlencoded"):
            return self.violation(400, "invalid_request", "token request must be form-encoded")
        f = {k: v[0] for k, v in urllib.parse.parse_qs(self.body.decode()).items()}
        for k in ("client_id", "scope", "grant_type"):
            if k not in f:
                return self.violation(400, "invalid_request", f"token request without {k}")
        if f["grant_type"] != "client_credentials":
            return self.violation(400, "unsupported_grant_type", "grant_type")
        if not f["scope"].endswith("/.default"):
            return self.violation(400, "invalid_scope", "client credentials need SCOPE/.default")
        if tenant != ARGS.tenant:
            return self.reply(400, {"error": "invalid_request",
                                    "error_description": "AADSTS90002: Tenant not found."})
        if "client_assertion" in f or "client_assertion_type" in f:
            return self.token_assertion(tenant, f)
        if f["client_id"] != ARGS.client_id or f.get("client_secret") != SECRET:
            return self.reply(401, {"error": "invalid_client",
                                    "error_description": "AADSTS7000215: Invalid client secret provided."})
        with LOCK:
            count("token")
        self.reply(200, self.issue({"ext_expires_in": CTL["token_ttl"]}))

    def token_assertion(self, tenant, f):
        """A certificate credential: the assertion verified against the
        certificates registered with --client-cert (azure_fake_assertion.py)."""
        audience = f"{self.base()}/{tenant}/oauth2/v2.0/token"
        client = "msal" if any(k.lower().startswith("x-client-") for k in list(f) + list(self.headers)) \
            else "other"
        with LOCK:
            bad = assertion.verify(f, CLIENT_CERTS, ARGS.client_id, audience, STATE["jtis"])
            try:
                d = assertion.describe(f.get("client_assertion", ""))
            except (ValueError, json.JSONDecodeError):
                d = None
            STATE["assertions"].append({"client": client, "accepted": bad is None, "shape": d})
        if bad:
            status, error, desc, violation = bad
            if violation:
                with LOCK:
                    STATE["violations"].append(f"POST {self.path_only}: {desc}")
            code = int(desc.split(":")[0][6:]) if desc.startswith("AADSTS") else 0
            return self.reply(status, {"error": error, "error_description": desc,
                                       "error_codes": [code]})
        with LOCK:
            count("token")
            count("token_assertion")
        self.reply(200, self.issue({"ext_expires_in": CTL["token_ttl"]}))

    def imds_token(self):
        if self.headers.get("Metadata") != "true":
            return self.reply(400, {"error": "invalid_request",
                                    "error_description": "Required metadata header not specified"})
        if self.query.get("api-version", [""])[0] != "2018-02-01" or "resource" not in self.query:
            return self.violation(400, "invalid_request", "IMDS token needs api-version and resource")
        d = self.issue()
        d["expires_in"] = str(d["expires_in"])  # IMDS sends strings
        d["resource"] = self.query["resource"][0]
        self.reply(200, d)

    # -- ARM --
    def arm(self):
        route = None
        for method, rx, op_id, allowed in ROUTES:
            m = rx.match(self.path_only)
            if m:
                if method != self.command:
                    continue
                route = (op_id, m.groupdict(), allowed)
                break
        if not route:
            return self.violation(404, "InvalidResourceType" if self.path_only.startswith("/subscriptions/") else "NoRoute",
                                  f"no operation {self.command} {self.path_only} in the swagger")
        op_id, params, allowed = route
        av = self.query.get("api-version", [None])[0]
        if av is None:
            return self.violation(400, "MissingApiVersionParameter",
                                  "The api-version query parameter (?api-version=) is required")
        versions = SKU_API_VERSIONS if op_id == "ResourceSkus_List" else KNOWN_API_VERSIONS
        if av not in versions:
            return self.violation(400, "InvalidApiVersionParameter", f"api-version {av} unknown")
        for k in self.query:
            if k not in allowed:
                return self.violation(400, "InvalidQueryParameter", f"query parameter {k} not declared")
        if op_id == "VirtualMachines_List" and "$filter" in self.query:
            if not self.query["$filter"][0].startswith("'virtualMachineScaleSet/id' eq "):
                return self.violation(400, "InvalidParameter",
                                      "$filter on a VM list takes only 'virtualMachineScaleSet/id'")
        if "$expand" in self.query and self.query["$expand"][0] not in ("instanceView", "userData"):
            return self.violation(400, "InvalidParameter", "$expand")
        auth = self.headers.get("Authorization", "")
        tok = auth[7:] if auth.startswith("Bearer ") else None
        with LOCK:
            exp = STATE["tokens"].get(tok)
        if not tok:
            return self.cloud_error(401, "AuthenticationFailed",
                                    "Authentication failed. The 'Authorization' header is missing.")
        if exp is None or exp < now():
            return self.cloud_error(401, "InvalidAuthenticationToken" if exp is None
                                    else "ExpiredAuthenticationToken",
                                    "The access token is invalid.")
        if params.get("subscriptionId") not in (None, ARGS.subscription):
            return self.cloud_error(404, "SubscriptionNotFound", "The subscription could not be found.")
        if params.get("resourceGroupName") not in (None, ARGS.resource_group):
            return self.cloud_error(404, "ResourceGroupNotFound", "Resource group could not be found.")
        with LOCK:
            count(op_id)
            if CTL["throttle"] > 0:
                CTL["throttle"] -= 1
                return self.cloud_error(429, "TooManyRequests", "The request is being throttled.",
                                        {"Retry-After": "1"})
            if CTL["fail5xx"] > 0:
                CTL["fail5xx"] -= 1
                return self.cloud_error(503, "ServiceUnavailable", "Try again later.")
        getattr(self, "op_" + op_id, self.op_unsupported)(params)

    def op_unsupported(self, params):
        self.cloud_error(400, "UnsupportedByFake", "operation not simulated")

    def op_url(self, oid):
        return (f"{self.base()}/subscriptions/{ARGS.subscription}/providers/Microsoft.Compute/"
                f"locations/{ARGS.location}/operations/{oid}?api-version=2024-07-01")

    def start_op(self, then, delay):
        oid = secrets.token_hex(8)
        op = {"status": "InProgress", "error": None, "done_at": now() + delay}

        def finish():
            then(op)
        op["then"] = finish
        STATE["ops"][oid] = op
        return oid

    def op_AsyncOperation_Get(self, params):
        with LOCK:
            op = STATE["ops"].get(params["operationId"])
            if not op:
                return self.cloud_error(404, "NotFound", "no such operation")
            d = {"name": params["operationId"], "status": op["status"],
                 "startTime": "2026-12-01T00:00:00Z"}
            if op["error"]:
                d["error"] = op["error"]
        hdr = {"Retry-After": "0"} if op["status"] == "InProgress" else None
        self.reply(200, d, hdr)

    def vm_id(self, name):
        return (f"/subscriptions/{ARGS.subscription}/resourceGroups/{ARGS.resource_group}/"
                f"providers/Microsoft.Compute/virtualMachines/{name}")

    def op_VirtualMachines_Get(self, params):
        with LOCK:
            vm = STATE["vms"].get(params["vmName"])
            if not vm:
                return self.cloud_error(404, "ResourceNotFound",
                                        f"The Resource 'Microsoft.Compute/virtualMachines/{params['vmName']}' was not found.")
            self.reply(200, vm_view(vm))

    def op_VirtualMachines_CreateOrUpdate(self, params):
        name = params["vmName"]
        try:
            body = json.loads(self.body)
        except Exception:
            return self.violation(400, "InvalidRequestContent", "body is not JSON")
        with LOCK:
            STATE.setdefault("puts", []).append({"name": name, "body": body,
                                                 "user_agent": self.headers.get("User-Agent", "")})
        errs = []
        validate(body, SCHEMA, "body", errs)
        size, prio = vm_rules(name, body, errs)
        if errs:
            return self.violation(400, "InvalidParameter", "; ".join(errs))
        hold = CTL["put_hold"]
        if hold[0]:
            time.sleep(hold[0])
        zone = (body.get("zones") or [""])[0]
        with LOCK:
            old = STATE["vms"].get(name)
            if old:
                if (old.get("zones") or [""])[0] != zone:
                    return self.cloud_error(409, "PropertyChangeNotAllowed",
                                            "Changing property 'zones' is not allowed.")
                if old["properties"].get("priority", "Regular") != body["properties"].get("priority", "Regular"):
                    return self.cloud_error(409, "PropertyChangeNotAllowed",
                                            "Changing property 'priority' is not allowed.")
                if old["properties"]["provisioningState"] == "Deleting":
                    return self.cloud_error(409, "Conflict", "The VM is being deleted.")
                old["tags"] = body.get("tags", {})
                count("put_existing")
                self.reply(200, vm_view(old))
                return
            if size not in KNOWN_SIZES:
                return self.cloud_error(409, "SkuNotAvailable",
                                        f"The requested VM size {size} is not available in location '{ARGS.location}'.")
            if zone and zone not in KNOWN_SIZES[size]:
                return self.cloud_error(409, "SkuNotAvailable",
                                        f"The requested VM size {size} is not available in zone {zone}.")
            if CTL["quota_exceeded"]:
                return self.cloud_error(409, "OperationNotAllowed",
                                        "Operation could not be completed as it results in exceeding "
                                        "approved Total Regional Cores quota.")
            key = f"{size}/{zone}/{prio}"
            left = CTL["capacity"].get(key)
            short = left is not None and left <= 0
            if short and CTL["short_mode"] == "sync":
                return self.cloud_error(409, "ZonalAllocationFailed" if zone else "AllocationFailed",
                                        "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone.")
            if left is not None and not short:
                CTL["capacity"][key] = left - 1
            props = body["properties"]
            nic_conf = props["networkProfile"].get("networkInterfaceConfigurations", [{}])[0]
            vm = dict(body)
            vm["id"] = self.vm_id(name)
            vm["name"] = name
            vm["type"] = "Microsoft.Compute/virtualMachines"
            vm["properties"] = dict(props, provisioningState="Creating", vmId=secrets.token_hex(16))
            vm["properties"]["osProfile"] = {k: v for k, v in props["osProfile"].items()
                                             if k not in ("customData", "adminPassword")}
            vm["_nic"] = nic_conf.get("name", name + "-nic")
            vm["_nic_delete"] = nic_conf.get("properties", {}).get("deleteOption") == "Delete"
            vm["_disk"] = name + "_OsDisk_1"
            vm["_disk_delete"] = props["storageProfile"]["osDisk"].get("deleteOption") == "Delete"
            vm["_key"] = key
            STATE["vms"][name] = vm
            STATE["nics"][vm["_nic"]] = name
            STATE["disks"][vm["_disk"]] = name
            count("vm_created")

            def done(op, vm=vm, short=short, zone=zone):
                if short:
                    vm["properties"]["provisioningState"] = "Failed"
                    op["status"] = "Failed"
                    op["error"] = {"code": "ZonalAllocationFailed" if zone else "AllocationFailed",
                                   "message": "Allocation failed. We do not have sufficient capacity "
                                              "for the requested VM size in this region."}
                else:
                    vm["properties"]["provisioningState"] = "Succeeded"
                    op["status"] = "Succeeded"
            oid = self.start_op(done, CTL["op_delay"])
        if hold[1]:
            time.sleep(hold[1])
        self.reply(201, vm_view(vm), {"Azure-AsyncOperation": self.op_url(oid)})

    def op_VirtualMachines_Delete(self, params):
        name = params["vmName"]
        for k in self.query.get("forceDeletion", []):
            if k not in ("true", "false"):
                return self.violation(400, "InvalidParameter", "forceDeletion is a boolean")
        with LOCK:
            vm = STATE["vms"].get(name)
            if not vm:
                return self.reply(204)
            vm["properties"]["provisioningState"] = "Deleting"
            count("vm_deleted")

            def done(op, name=name):
                remove_vm(name)
                op["status"] = "Succeeded"
            oid = self.start_op(done, CTL["delete_delay"])
        url = self.op_url(oid)
        self.reply(202, None, {"Azure-AsyncOperation": url, "Location": url + "&monitor=true"})

    def op_VirtualMachines_SimulateEviction(self, params):
        with LOCK:
            vm = STATE["vms"].get(params["vmName"])
            if not vm:
                return self.cloud_error(404, "ResourceNotFound", "not found")
            if vm["properties"].get("priority") not in ("Spot", "Low"):
                return self.cloud_error(409, "OperationNotAllowed",
                                        "Simulate eviction is only for Spot VMs.")
            vm["properties"]["provisioningState"] = "Deleting"
            vm["_gone_at"] = now() + CTL["evict_delay"]
            count("evicted")
        self.reply(204)

    def op_VirtualMachines_List(self, params):
        with LOCK:
            names = sorted(STATE["vms"])
            start = int(self.query.get("$skiptoken", ["0"])[0] or 0)
            page = names[start:start + int(CTL["page_size"])]
            d = {"value": [vm_view(STATE["vms"][n]) for n in page]}
            if start + len(page) < len(names):
                d["nextLink"] = (f"{self.base()}{self.path_only}?api-version="
                                 f"{self.query['api-version'][0]}&$skiptoken={start + len(page)}")
        self.reply(200, d)

    def op_ResourceSkus_List(self, params):
        d = {"value": [{"resourceType": "virtualMachines", "name": s, "tier": "Standard",
                        "size": s.split("_", 1)[1], "locations": [ARGS.location],
                        "locationInfo": [{"location": ARGS.location, "zones": z}],
                        "restrictions": []} for s, z in sorted(KNOWN_SIZES.items())]}
        self.reply(200, d)


SECRET = None
CLIENT_CERTS = assertion.Registry()


def main():
    global ARGS, EXTRACT, SCHEMA, ROUTES, SECRET
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--spec", default=os.path.join(HERE, "..", "..", "..", "shared", "specs",
                                                   "azure-compute",
                                                   "compute-2024-07-01.autoscaler-extract.json"))
    ap.add_argument("--tenant", default="tenant-1")
    ap.add_argument("--client-id", default="client-1")
    ap.add_argument("--secret-env", default="AZURE_FAKE_SECRET")
    ap.add_argument("--subscription", default="sub-1")
    ap.add_argument("--resource-group", default="rg-1")
    ap.add_argument("--location", default="eastus")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--client-cert", action="append", default=[],
                    help="a PEM certificate registered on the app (repeatable); its key signs "
                         "client assertions the fake accepts")
    ARGS = ap.parse_args()
    SECRET = os.environ.get(ARGS.secret_env, "")
    for path in ARGS.client_cert:
        with open(path, "rb") as fh:
            CLIENT_CERTS.add_pem(fh.read())
    with open(ARGS.spec) as f:
        EXTRACT = json.load(f)
    SCHEMA = build_schema()
    ROUTES = compile_routes()
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    srv.daemon_threads = True
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ARGS.cert, ARGS.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print(f"AZURE_FAKE_PORT={srv.server_address[1]}", flush=True)
    print("AZURE_FAKE_READY", flush=True)
    srv.serve_forever()  # until the test kills it


if __name__ == "__main__":
    main()
