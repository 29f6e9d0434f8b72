#!/bin/sh
# config/bootstrap-local.sh: the bootstrap of a `kind: local` node
# (providers/local/README.md).  Name it as the pool's `bootstrap:`; the
# controller fills the {{...}} placeholders, the local provider writes the
# result to STATE_DIR/nodes/ID/bootstrap.sh (mode 0600) and runs it with
# /bin/sh in a session of its own, with TARMAC_BIN, TARMAC_AGENT_WORK_DIR,
# TARMAC_GPU_FAKE, TARMAC_METADATA, TARMAC_METADATA_URL, TARMAC_ADVERTISE_ADDR and TARMAC_AGENT_ARGS
# set.  The enrollment secret goes to a file only the agent's user can read,
# never to the command line or the environment (both are readable by other
# processes); it is single use and expires, see docs/agents.md.  Run as root,
# the agent runs each job under a user of its own (docs/isolation.md); the
# provider makes the folders down to the work folder 0711 for them.
set -eu
umask 077
cd "$TARMAC_AGENT_WORK_DIR"
# Written again on an agent restart: the agent then has its token and
# never sends the (spent) secret.
printf '%s' '{{enroll_secret}}' > enroll.secret
cat > ca.pem <<'TARMAC_CA_EOF'
{{ca_pem}}
TARMAC_CA_EOF
ca=
if grep -q 'BEGIN CERTIFICATE' ca.pem; then
    ca="--ca-file $TARMAC_AGENT_WORK_DIR/ca.pem"
fi
url=
if [ -n "${TARMAC_METADATA_URL:-}" ]; then
    url="--metadata-url $TARMAC_METADATA_URL"
fi
# $ca, $url and TARMAC_AGENT_ARGS are split into words on purpose (the
# provider refuses quotes and shell syntax in agent_args).
# shellcheck disable=SC2086
exec "$TARMAC_BIN" agent --controller '{{controller_url}}' --node-id '{{node_id}}' \
    --work-dir "$TARMAC_AGENT_WORK_DIR" --enroll-secret-file "$TARMAC_AGENT_WORK_DIR/enroll.secret" \
    --gpu-fake "$TARMAC_GPU_FAKE" --metadata "${TARMAC_METADATA:-none}" $url $ca \
    ${TARMAC_ADVERTISE_ADDR:+--advertise-addr "$TARMAC_ADVERTISE_ADDR"} ${TARMAC_AGENT_ARGS:-}
