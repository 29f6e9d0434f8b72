#!/bin/sh
# scripts/check-banned.sh: the calls the house style bans, refused in
# core/, controller/ and providers/ (a checksrc-style list).
# sprintf, vsprintf, strcpy and strcat write without a bound;
# strncat and strtok are easy to get wrong (strtok keeps hidden state);
# gets cannot be used safely; atoi and atol turn bad input into 0 with no
# error.  Use snprintf, memcpy with a checked length, strtol/strtoll with
# an end pointer, or core's parsers.  Comments and string literals are
# skipped, so a sentence that names a banned call is not a finding.
#
#   scripts/check-banned.sh [SOURCE_DIR]
set -eu
cd "${1:-$(dirname "$0")/..}"

find core controller providers -name '*.[ch]' | sort | xargs awk '
BEGIN { banned = "sprintf|vsprintf|strcpy|strcat|strncat|strtok|gets|atoi|atol|atoll" }
FNR == 1 { incomment = 0 }
{
    line = $0; out = ""
    while (length(line) > 0) {
        if (incomment) {
            e = index(line, "*/")
            if (e == 0) { line = ""; break }
            line = substr(line, e + 2); incomment = 0; continue
        }
        c = substr(line, 1, 1); two = substr(line, 1, 2)
        if (two == "/*") { incomment = 1; line = substr(line, 3); out = out " "; continue }
        if (two == "//") break
        if (c == "\"" || c == "\047") {
            # Skip a literal, escapes included.
            q = c; i = 2
            while (i <= length(line)) {
                d = substr(line, i, 1)
                if (d == "\\") { i += 2; continue }
                if (d == q) break
                i++
            }
            line = substr(line, i + 1); out = out q q; continue
        }
        out = out c; line = substr(line, 2)
    }
    if (match(out, "(^|[^A-Za-z0-9_])(" banned ")[ \t]*\\(")) {
        print FILENAME ":" FNR ": banned call: " $0
        bad = 1
    }
}
END { exit bad }'
