# The layering rule (docs/architecture.md): no file includes a folder
# it may not (scripts/check-includes.sh; scripts/test.sh runs it first too).
tm_add_test(check_includes LABELS unit foundation TIMEOUT 60
            COMMAND sh ${CMAKE_SOURCE_DIR}/scripts/check-includes.sh ${CMAKE_SOURCE_DIR})

# The banned calls (sprintf, strcpy, strcat, atoi, ...; scripts/check-banned.sh
# says why each), refused in core/, controller/ and providers/, and the
# check's own test on a fixture tree (comments and strings are not findings).
tm_add_test(check_banned LABELS unit foundation TIMEOUT 60
            COMMAND sh ${CMAKE_SOURCE_DIR}/scripts/check-banned.sh ${CMAKE_SOURCE_DIR})
tm_add_test(check_banned_selftest LABELS unit foundation TIMEOUT 60
            COMMAND sh ${CMAKE_SOURCE_DIR}/tests/unit/check_banned_selftest.sh)

# The docs describe files as they are: every file a README or a docs/ page
# names exists, and the README's first fenced block is the two commands
# (scripts/check-docs.sh); and the check's own test on a fixture tree.
tm_add_test(check_docs LABELS unit foundation TIMEOUT 60
            COMMAND sh ${CMAKE_SOURCE_DIR}/scripts/check-docs.sh ${CMAKE_SOURCE_DIR})
tm_add_test(check_docs_selftest LABELS unit foundation TIMEOUT 60
            COMMAND sh ${CMAKE_SOURCE_DIR}/tests/unit/check_docs_selftest.sh)
