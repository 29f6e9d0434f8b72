# docs/openapi.yaml as a contract (issue 18, item 6).
#
# openapi_lint: the description passes `redocly lint` (@redocly/cli,
# pinned in the script, installed from the npm registry into the build
# directory the first time; it fails, not skips, without the registry).
tm_add_test(openapi_lint LABELS unit service TIMEOUT 300
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/openapi_lint.sh)
