#!/usr/bin/env bash
# Print a libpq URL for a fresh, empty database named after the caller:
#   url=$(tests/lib/pg_newdb.sh mytest)
# Needs the cluster started by pg_cluster.sh (TM_TEST_STATE/pg.env).
set -euo pipefail
name=${1:?database name}
# shellcheck disable=SC1091
. "${TM_TEST_STATE:?}/pg.env"
psql -q -X -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" -c "CREATE DATABASE \"$name\"" >/dev/null
echo "$TM_PG_BASE/$name"
