#!/bin/sh
# scripts/check-includes.sh: the layering rule of docs/architecture.md,
# checked on every #include line of core/, controller/ and providers/
# (tests and benchmarks may include anything).  Each folder lists the
# project paths it may include besides its own files; the pure folders may
# not include an I/O library either.  Prints each offending line and fails
# when there is one.  One awk pass, so it stays fast on a loaded machine.
#
#   scripts/check-includes.sh [SOURCE_DIR]
set -eu
cd "${1:-$(dirname "$0")/..}"

find core controller providers -name '*.[ch]' | sort | xargs awk '
function allowed(f) {
    if (f ~ /^core\//) return "core/"
    if (f ~ /^controller\/(sched|fleet|spec|io)\//) return "core/"
    if (f ~ /^controller\/reconcile\//) return "core/ controller/sched/ controller/fleet/ providers/provider.h"
    if (f ~ /^controller\/replay\//)
        return "core/ controller/sched/ controller/fleet/ providers/provider.h providers/sim/simcloud.h"
    if (f ~ /^controller\/store\//) return "core/ controller/io/ controller/reconcile/ controller/spec/"
    if (f ~ /^controller\/api\//) return "core/ controller/io/ controller/spec/"
    if (f ~ /^controller\/agent\//) return "core/ controller/io/ controller/spec/"
    if (f ~ /^controller\/daemon\//)
        return "core/ controller/sched/ controller/fleet/ controller/spec/ controller/reconcile/ " \
               "controller/io/ controller/store/ controller/api/ providers/"
    if (f ~ /^controller\/cli\//) return "core/ controller/ providers/"
    if (f == "controller/main.c") return "controller/cli/cli.h"
    if (f ~ /^providers\/registry\./) return "core/ providers/"
    if (f ~ /^providers\/common\//) return "core/ providers/provider.h"
    if (f ~ /^providers\/[^\/]+\//) return "core/ providers/provider.h providers/common/ controller/io/"
    if (f ~ /^providers\//) return "core/"
    return ""
}
function pure(f) {
    return f ~ /^(core|controller\/(sched|fleet|spec|reconcile|replay)|providers\/common)\// ||
           f ~ /^providers\/sim\/simcloud\./
}
/^#[ \t]*include[ \t]*</ {
    inc = $0; sub(/^[^<]*</, "", inc); sub(/>.*/, "", inc)
    if (pure(FILENAME) && inc ~ /^(uv\.h|libpq-fe\.h|curl\/curl\.h|h2o\.h)$/) {
        printf "%s:%d: a pure folder includes <%s>\n", FILENAME, FNR, inc; bad++
    }
    next
}
/^#[ \t]*include[ \t]*"/ {
    inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
    own = FILENAME; sub(/[^\/]*$/, "", own)
    rest = substr(inc, length(own) + 1)
    if (substr(inc, 1, length(own)) == own && rest !~ /\//) next
    ok = allowed(FILENAME); n = split(ok, p, " "); hit = 0
    for (i = 1; i <= n; i++) if (substr(inc, 1, length(p[i])) == p[i]) { hit = 1; break }
    if (!hit) {
        printf "%s:%d: may not include \"%s\" (allowed: %s)\n", FILENAME, FNR, inc,
               ok == "" ? "nothing outside its folder" : ok; bad++
    }
}
END {
    if (bad) { printf "check-includes: %d include(s) break the layering rule\n", bad; exit 1 }
    print "check-includes: every include follows the layering rule"
}' >&2
