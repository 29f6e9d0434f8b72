#!/bin/sh
# scripts/check-includes.sh: the layering rule of README.md ("Architecture"),
# checked on every #include "..." line of core/, controller/ and providers/
# (tests and benchmarks may include anything).  Each folder lists the
# project paths it may include; the pure folders may not include an I/O
# library either.  Prints each offending line and fails when there is one.
#
#   scripts/check-includes.sh [SOURCE_DIR]
set -eu
cd "${1:-$(dirname "$0")/..}"

PURE_BANNED='uv\.h|libpq-fe\.h|curl/curl\.h|h2o\.h'
C=controller

# allowed FILE: the include prefixes (a path prefix, or an exact header)
# FILE may name, besides its own folder.
allowed() {
    case $1 in
    core/*)                 echo "core/" ;;
    $C/sched/*|$C/fleet/*|$C/spec/*|$C/io/*)
                            echo "core/" ;;
    $C/reconcile/*)         echo "core/ $C/sched/ $C/fleet/ providers/provider.h" ;;
    $C/replay/*)            echo "core/ $C/sched/ $C/fleet/ providers/provider.h providers/sim/simcloud.h" ;;
    $C/store/*)             echo "core/ $C/io/ $C/reconcile/ $C/spec/" ;;
    $C/api/*)               echo "core/ $C/io/ $C/spec/" ;;
    $C/daemon/*)            echo "core/ $C/sched/ $C/fleet/ $C/spec/ $C/reconcile/ $C/io/ $C/store/ $C/api/ providers/" ;;
    $C/cli/*)               echo "core/ $C/ providers/" ;;
    $C/main.c)              echo "$C/cli/cli.h" ;;
    providers/registry.*)   echo "core/ providers/" ;;
    providers/common/*)     echo "core/ providers/provider.h" ;;
    providers/*/*)          echo "core/ providers/provider.h providers/common/ $C/io/" ;;
    providers/*)            echo "core/" ;;
    *)                      echo "" ;;
    esac
}

pure() {
    case $1 in
    core/*|$C/sched/*|$C/fleet/*|$C/spec/*|$C/reconcile/*|$C/replay/*|providers/common/*|providers/sim/simcloud.*)
        return 0 ;;
    esac
    return 1
}

bad=0
for f in $(find core controller providers -name '*.[ch]' | sort); do
    own=${f%/*}/
    ok=$(allowed "$f")
    grep -n '^#[[:space:]]*include' "$f" | while IFS= read -r line; do
        inc=$(printf '%s\n' "$line" | sed -n 's/.*#[[:space:]]*include[[:space:]]*["<]\([^">]*\)[">].*/\1/p')
        case $line in
        *'<'*)
            if pure "$f" && printf '%s\n' "$inc" | grep -Eq "^($PURE_BANNED)$"; then
                echo "$f:${line%%:*}: a pure folder includes <$inc>"
            fi
            continue ;;
        esac
        case $inc in
        "$own"*/*) ;;
        "$own"*) continue ;;
        esac
        hit=""
        for p in $ok; do
            case $inc in
            "$p"*) hit=1; break ;;
            esac
        done
        [ -n "$hit" ] || echo "$f:${line%%:*}: may not include \"$inc\" (allowed: ${ok:-nothing outside its folder})"
    done
done >"${TMPDIR:-/tmp}/check-includes.$$"
if [ -s "${TMPDIR:-/tmp}/check-includes.$$" ]; then
    cat "${TMPDIR:-/tmp}/check-includes.$$" >&2
    echo "check-includes: $(wc -l <"${TMPDIR:-/tmp}/check-includes.$$") include(s) break the layering rule" >&2
    bad=1
fi
rm -f "${TMPDIR:-/tmp}/check-includes.$$"
[ "$bad" = 0 ] && echo "check-includes: every include follows the layering rule"
exit "$bad"
