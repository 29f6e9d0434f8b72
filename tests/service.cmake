# The service surface: the HTTP API on h2o, tokens, request
# bodies.

tm_add_c_test(test_api_body ${CMAKE_SOURCE_DIR}/tests/unit/spec/test_api_body.c LABELS unit service
              TIMEOUT 60 LINK tarmac_spec)
# The API end to end: a loop thread serving, libcurl and openapi_check.py
# as clients, the run's PostgreSQL cluster underneath.
tm_add_c_test(test_api ${CMAKE_SOURCE_DIR}/tests/unit/api/test_api.c LABELS integration service
              FIXTURES pg TIMEOUT 300)
# The group commit the submissions and heartbeats share (controller/io/),
# against the run's PostgreSQL cluster.
tm_add_c_test(test_group_commit ${CMAKE_SOURCE_DIR}/tests/unit/io/test_group_commit.c
              LABELS integration service FIXTURES pg TIMEOUT 120)
# Its priority gate (the controller's tick first): held, let go, bounded.
tm_add_c_test(test_gc_gate ${CMAKE_SOURCE_DIR}/tests/unit/io/test_gc_gate.c
              LABELS unit service FIXTURES pg TIMEOUT 120)

# The strict Prometheus text parser test_api reads /metrics with: it must
# refuse malformed expositions.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  tm_add_test(prom_parse_selftest LABELS unit service TIMEOUT 60
              COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/tests/lib/prom_parse.py --self-test)
endif()

# Replays the corpus through the fuzz entry point with a plain main(), so
# every compiler exercises the body parsers on every ctest run.
add_executable(fuzz_api_body_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_api_body.c)
target_compile_definitions(fuzz_api_body_replay PRIVATE TM_FUZZ_REPLAY)
target_link_libraries(fuzz_api_body_replay PRIVATE tarmac_lib)
tm_add_test(fuzz_api_body_corpus LABELS unit service TIMEOUT 60
            COMMAND fuzz_api_body_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/api_body)

# The request path end to end: route matching, Content-Type,
# the strict reader and every body parser, with a corpus of hostile cases.
add_executable(fuzz_api_request_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_api_request.c)
target_compile_definitions(fuzz_api_request_replay PRIVATE TM_FUZZ_REPLAY)
target_link_libraries(fuzz_api_request_replay PRIVATE tarmac_lib)
tm_add_test(fuzz_api_request_corpus LABELS unit service TIMEOUT 60
            COMMAND fuzz_api_request_replay ${CMAKE_SOURCE_DIR}/tests/fuzz/corpus/api_request)

if(TM_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(WARNING "TM_FUZZ needs clang; fuzz_api_body is not built")
  else()
    # The parsers are compiled into the target so they carry the fuzzer's
    # coverage instrumentation, not only the harness.
    add_executable(fuzz_api_body ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_api_body.c
                   ${CMAKE_SOURCE_DIR}/controller/spec/job_spec.c ${CMAKE_SOURCE_DIR}/controller/spec/api_body.c
                   ${CMAKE_SOURCE_DIR}/controller/spec/json_body.c
                   ${CMAKE_SOURCE_DIR}/core/model.c ${CMAKE_SOURCE_DIR}/core/units.c ${CMAKE_SOURCE_DIR}/core/err.c)
    target_include_directories(fuzz_api_body PRIVATE ${CMAKE_SOURCE_DIR})
    target_compile_options(fuzz_api_body PRIVATE -fsanitize=fuzzer,address,undefined
                           -fno-omit-frame-pointer)
    target_link_options(fuzz_api_body PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_api_body PRIVATE PkgConfig::CJSON PkgConfig::JANSSON ${MATH_LIB})
    # Routes and all: the route table pulls in the server, so the whole
    # library links; the harness and spec/ carry the instrumentation.
    add_executable(fuzz_api_request ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_api_request.c)
    target_compile_options(fuzz_api_request PRIVATE -fsanitize=fuzzer,address,undefined
                           -fno-omit-frame-pointer)
    target_link_options(fuzz_api_request PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_libraries(fuzz_api_request PRIVATE tarmac_lib)
  endif()
endif()

# The real binary: serve with TARMAC_LISTEN/TARMAC_DATABASE_URL, a token
# from `tarmac token create`.  Exits 77 (skipped) until main.c and serve
# are wired to the API.
tm_add_test(itest_api_serve LABELS integration service FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/api_serve.sh)
set_tests_properties(itest_api_serve PROPERTIES SKIP_RETURN_CODE 77)

# HTTPS with a certificate from a throwaway CA (openssl CLI), bad
# certificates and keys refused at start, and the configured body, list
# and rate limits, all on the real binary.
tm_add_test(itest_api_tls LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/api_tls.sh)
# The TLS context alone: good pair (TLS 1.2 minimum, ALPN by an in-memory
# handshake) and each bad file refused by name, never showing a key.
tm_add_c_test(test_api_tls ${CMAKE_SOURCE_DIR}/tests/unit/api/test_api_tls.c LABELS unit service
              TIMEOUT 60)

# The dashboard at / in headless Chromium (Debian's chromium, installed by
# scripts/setup.sh): the rendered page against the API, the policy and a
# screenshot.  Fails, not skips, when chromium is missing.
tm_add_test(itest_dashboard LABELS integration service FIXTURES pg TIMEOUT 240
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/dashboard.sh)

# The CLI over the API (tarmac submit, jobs, nodes, pools, decisions, why,
# budget, spend) against the real serve: tables, json, roles, bad input,
# where the token comes from, and that it is never printed.
tm_add_test(itest_cli_api LABELS integration service FIXTURES pg TIMEOUT 240
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/cli_api.sh)
# Where the CLI's URL, token and CA come from (flags, environment, the
# client file and its permissions), and its escaping and tables.
tm_add_c_test(test_cli_client ${CMAKE_SOURCE_DIR}/tests/unit/cli/test_cli_client.c LABELS unit service
              TIMEOUT 60)
# `image` by the OCI distribution grammar and the refused `env` names, as
# the CLI and the API check them (controller/spec/image_ref.c, job_spec.c).
tm_add_c_test(test_job_image_env ${CMAKE_SOURCE_DIR}/tests/unit/spec/test_job_image_env.c LABELS unit service
              TIMEOUT 30 LINK tarmac_spec)
