#!/bin/sh
# scripts/check-docs.sh: the README and the docs describe files as they are.
# Every file name a README.md or a docs/*.md page mentions (a word ending in
# .c, .h, .sh, .sql, .md, .cmake, .yaml or .py) must exist, looked up from
# the page's folder, its parent, the checkout's root, controller/ and
# providers/ (folder READMEs name their neighbours as sched/planner.c or
# aws/sigv4.c).  A name that points into another project (curl's
# lib/vtls/vtls.c, say) is written with that project's name before it,
# `curl's lib/vtls/vtls.c` or `owner/repo:path`, and is skipped.  The README's first
# fenced block must be the two commands, and .ci/run must call the second.
# Paths on a node (absolute or under ~), placeholders in capitals and the
# example programs of the launch lines are not files of the checkout.
#
#   scripts/check-docs.sh [SOURCE_DIR]
set -eu
cd "${1:-$(dirname "$0")/..}"
bad=0

pages=$( (find . -name README.md -not -path './build*' -not -path './.git/*' \
          -not -path './node_modules/*' -not -path './tests/fuzz/corpus/*'; ls docs/*.md) | sort -u)
for page in $pages; do
    dir=$(dirname "$page")
    # Words that look like file names, minus URLs and other projects' paths.
    names=$(sed -e 's#https\?://[^ )>]*##g' -e 's#<[A-Za-z0-9_./-]*>##g' -e 's#[^ `(]*\*[^ `)]*##g' \
                -e "s#[A-Za-z0-9_.-]*'s [A-Za-z0-9_./-]*##g" \
                -e 's#[A-Za-z0-9_.-]*/[A-Za-z0-9_.-]*:[A-Za-z0-9_./-]*##g' "$page" |
            grep -oE '[~A-Za-z0-9_./-]*[A-Za-z0-9_-]\.(c|h|sh|sql|md|cmake|yaml|py)\b' | sort -u)
    for n in $names; do
        case "$n" in
            # Paths on a node or in a home folder, placeholders in capitals,
            # and the example programs the launch lines run.
            /*|~*|*[A-Z][A-Z_]*/*|NNNN*|train.py) continue ;;
        esac
        case "$n" in
            */*) ;;
            *) [ -e "$dir/$n" ] || [ -e "$n" ] || [ -e "docs/$n" ] || \
               [ -n "$(find core controller providers scripts tests bench migrations config docs -name "$n" -print -quit 2>/dev/null)" ] || \
               { echo "$page: names $n, which is nowhere in the checkout"; bad=1; }
               continue ;;
        esac
        found=0
        for base in "$dir" "$dir/.." . controller providers; do
            [ -e "$base/$n" ] && { found=1; break; }
        done
        [ "$found" = 1 ] || { echo "$page: names $n, which does not exist"; bad=1; }
    done
done

first=$(awk '/^```/ { if (inb) exit; inb = 1; next } inb { print }' README.md)
run=$(printf '%s\n' "$first" | sed -n 1p)
test_cmd=$(printf '%s\n' "$first" | sed -n 2p)
[ "$(printf '%s\n' "$first" | wc -l)" = 2 ] || { echo "README.md: the first fenced block is not exactly two lines"; bad=1; }
case "$run" in *scripts/demo.sh*) ;; *) echo "README.md: line one of the first fenced block is not the run command: $run"; bad=1 ;; esac
grep -qxF "$test_cmd" .ci/run || { echo ".ci/run does not call the README's test command ($test_cmd) unchanged"; bad=1; }

[ "$bad" = 0 ] && echo "check-docs: every file the docs name exists; the README's two commands are in place"
exit "$bad"
