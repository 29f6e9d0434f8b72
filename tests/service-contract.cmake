# docs/openapi.yaml as a contract.
#
# openapi_lint: the description passes `redocly lint` (@redocly/cli,
# pinned in the script, installed from the npm registry into the build
# directory the first time; it fails, not skips, without the registry).
tm_add_test(openapi_lint LABELS unit service slow TIMEOUT 300
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/openapi_lint.sh)

# The contract: tests/lib/openapi_check.py drives every operation of the
# file against the real `tarmac serve` (valid requests, hostile bodies,
# unknown path parameters, wrong methods, ended nodes) and checks every
# answer's status and body against it.  The stricter behaviour checks
# (NEW_BEHAVIOUR in the checker) are on: the server must pass them.
tm_add_test(itest_api_contract LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/api_contract.sh)
