// tests/lib/azure_sdk_check.js: the official clients against the Azure fake,
// so the fake is held to what the real SDKs send and accept.
//
//   NODE_PATH=DIR/node_modules NODE_EXTRA_CA_CERTS=CA node azure_sdk_check.js URL SECRET PUTS.json \
//       CLIENT.pem OTHER.pem
//
// 1. @azure/identity ClientSecretCredential gets a token from the fake
//    (OpenID discovery + token endpoint); a wrong secret is refused.
//    ClientCertificateCredential with CLIENT.pem (key + certificate, the
//    one registered on the fake's app) gets a token: the fake verifies the
//    assertion MSAL signs; OTHER.pem (not registered) is refused with
//    AADSTS700027.  Then the header and claim names of MSAL's assertion are
//    compared with those of tarmac's (the fake records both; the caller ran
//    `tarmac check azure` with the certificate first): the claims must be
//    the same names, every header name MSAL sends (x5c aside, sent only with
//    sendCertificateChain) must be in ours; alg and lifetime are printed.
// 2. @azure/arm-compute: every VM PUT body the C provider sent (PUTS.json,
//    from the fake) is sent again through the SDK's serializer under another
//    name; the body the fake then receives must equal ours key for key, or
//    our body carries something the SDK's model does not know (a key the
//    real service's published model lacks).  The fake must accept the SDK's
//    requests: create (LRO to Succeeded), get, list (every nextLink page),
//    simulateEviction, delete (LRO), resourceSkus.list.
// 3. A body the real API refuses (evictionPolicy on a Regular VM) must be
//    refused by the fake too.
// Prints "SDK CHECK OK" and one line per step; exits 1 on any mismatch.
const { ClientSecretCredential, ClientCertificateCredential } = require("@azure/identity");
const { ComputeManagementClient } = require("@azure/arm-compute");
const fs = require("fs");

const [url, secret, putsFile, clientPem, otherPem] = process.argv.slice(2);
let failed = 0;
function fail(msg) { console.log("FAIL: " + msg); failed++; }
function ok(msg) { console.log("ok: " + msg); }

function canon(v) {
  if (Array.isArray(v)) return v.map(canon);
  if (v && typeof v === "object") {
    const o = {};
    for (const k of Object.keys(v).sort()) o[k] = canon(v[k]);
    return o;
  }
  return v;
}

// The SDK's models flatten ARM's "properties" envelopes (x-ms-client-flatten)
// and put them back on the wire: give it the flattened shape.
function flatten(v) {
  if (Array.isArray(v)) return v.map(flatten);
  if (v && typeof v === "object") {
    const o = {};
    for (const [k, x] of Object.entries(v)) {
      if (k === "properties" && x && typeof x === "object" && !Array.isArray(x)) Object.assign(o, flatten(x));
      else o[k] = flatten(x);
    }
    return o;
  }
  return v;
}

async function fakeGet(path) {
  const r = await fetch(url + path);
  return r.json();
}

// ClientCertificateCredential against the fake, then MSAL's assertion beside ours.
async function certificateFlow(opts) {
  const scope = "https://management.azure.com/.default";
  const cc = new ClientCertificateCredential("tenant-1", "client-1", { certificatePath: clientPem }, opts);
  const t = await cc.getToken(scope);
  if (!t || !t.token) fail("ClientCertificateCredential: no token");
  else ok("ClientCertificateCredential token from the fake (the fake verified MSAL's assertion)");
  try {
    await new ClientCertificateCredential("tenant-1", "client-1", { certificatePath: otherPem }, opts)
      .getToken(scope);
    fail("an unregistered certificate got a token");
  } catch (e) {
    const m = String(e.message);
    if (!m.includes("AADSTS700027")) fail("unregistered certificate refused, but not with AADSTS700027: " + m.slice(0, 200));
    else ok("unregistered certificate refused: AADSTS700027");
  }
  const seen = await fakeGet("/__fake/assertions");
  const sdk = seen.filter((a) => a.client === "msal" && a.accepted).pop();
  const ours = seen.filter((a) => a.client !== "msal" && a.accepted).pop();
  if (!sdk) { fail("no accepted assertion from MSAL recorded"); return; }
  if (!ours) { fail("no accepted assertion from tarmac recorded (run tarmac check azure first)"); return; }
  const sa = sdk.shape, oa = ours.shape;
  console.log(`   sdk  alg=${sa.alg} header=${sa.header.join(",")} claims=${sa.claims.join(",")} lifetime=${sa.lifetime}s`);
  console.log(`   ours alg=${oa.alg} header=${oa.header.join(",")} claims=${oa.claims.join(",")} lifetime=${oa.lifetime}s`);
  if (JSON.stringify(sa.claims) !== JSON.stringify(oa.claims))
    fail(`claim names differ: sdk ${sa.claims} ours ${oa.claims}`);
  else ok("assertion claim names equal the SDK's");
  const missing = sa.header.filter((k) => k !== "x5c" && !oa.header.includes(k));
  if (missing.length) fail(`header names the SDK sends and we do not: ${missing}`);
  else ok(`assertion header carries every name the SDK's does (${sa.header.join(",")})`);
}

async function main() {
  const opts = { authorityHost: url, disableInstanceDiscovery: true };
  const cred = new ClientSecretCredential("tenant-1", "client-1", secret, opts);
  const tok = await cred.getToken("https://management.azure.com/.default");
  if (!tok || !tok.token) fail("no token"); else ok("ClientSecretCredential token from the fake");
  try {
    await new ClientSecretCredential("tenant-1", "client-1", "wrong", opts)
      .getToken("https://management.azure.com/.default");
    fail("a wrong secret got a token");
  } catch (e) { ok("wrong secret refused: " + String(e.message).split("\n")[0].slice(0, 80)); }

  await certificateFlow(opts);

  const client = new ComputeManagementClient(cred, "sub-1", { endpoint: url });
  const ours = JSON.parse(fs.readFileSync(putsFile, "utf8"))
    .filter((p) => !/node|azsdk/.test(p.user_agent));
  if (ours.length < 2) fail(`expected the provider's spot and regular PUTs, got ${ours.length}`);
  let i = 0;
  for (const p of ours) {
    const name = `sdk-check-${++i}`;
    const body = JSON.parse(JSON.stringify(p.body));
    body.properties.osProfile.computerName = name;
    const res = await client.virtualMachines.beginCreateOrUpdateAndWait("rg-1", name, flatten(body));
    if (res.provisioningState !== "Succeeded") fail(`${name}: ${res.provisioningState}`);
    const got = (await fakeGet("/__fake/puts")).filter((x) => x.name === name).pop();
    if (!got) { fail(`${name}: the fake saw no PUT`); continue; }
    const a = JSON.stringify(canon(got.body)), b = JSON.stringify(canon(body));
    if (a !== b) fail(`${p.name}: the SDK sends a different body than ours:\n  sdk  ${a}\n  ours ${b}`);
    else ok(`${p.name} (${body.properties.priority}): our body equals the SDK's serialisation (${Object.keys(body.properties).length} property groups)`);
  }
  const vm = await client.virtualMachines.get("rg-1", "sdk-check-1");
  if (vm.name !== "sdk-check-1") fail("get"); else ok("get");
  let n = 0;
  for await (const x of client.virtualMachines.list("rg-1")) { void x; n++; }
  const state = await fakeGet("/__fake/state");
  if (n !== Object.keys(state.vms).length) fail(`list gave ${n} of ${Object.keys(state.vms).length}`);
  else ok(`list: ${n} VMs over nextLink pages`);
  const spot = ours.findIndex((p) => p.body.properties.priority === "Spot");
  if (spot >= 0) { await client.virtualMachines.simulateEviction("rg-1", `sdk-check-${spot + 1}`); ok("simulateEviction"); }
  await client.virtualMachines.beginDeleteAndWait("rg-1", "sdk-check-1");
  ok("delete (LRO followed)");
  let skus = 0;
  for await (const s of client.resourceSkus.list({ filter: "location eq 'eastus'" })) { void s; skus++; }
  if (!skus) fail("resourceSkus.list empty"); else ok(`resourceSkus.list: ${skus}`);
  const before = (await fakeGet("/__fake/violations")).length;
  try {
    await client.virtualMachines.beginCreateOrUpdateAndWait("rg-1", "sdk-bad", {
      location: "eastus",
      hardwareProfile: { vmSize: "Standard_D2s_v5" }, priority: "Regular", evictionPolicy: "Delete",
    });
    fail("the fake accepted evictionPolicy on a Regular VM");
  } catch (e) { ok(`refused as Azure would: ${e.code || e.statusCode}`); }
  const after = (await fakeGet("/__fake/violations")).length;
  if (after !== before + 1) fail(`violations ${before} -> ${after}`);
  console.log(failed ? `SDK CHECK FAILED (${failed})` : "SDK CHECK OK");
  process.exit(failed ? 1 : 0);
}
main().catch((e) => { console.log("FAIL: " + (e.stack || e)); process.exit(1); });
