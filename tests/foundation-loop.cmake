# Loop glue: controller/io/pg_uv.c (libpq) and controller/io/http_uv.c (libcurl).
# test_pg_uv runs against the run's PostgreSQL cluster; its redaction cases
# need no server and also run alone as a unit test (TM_PG_UV_TESTS=unit).
tm_add_c_test(test_pg_uv ${CMAKE_SOURCE_DIR}/tests/unit/io/test_pg_uv.c
              LABELS integration foundation FIXTURES pg TIMEOUT 120)
tm_add_c_test(test_pg_uv_redact ${CMAKE_SOURCE_DIR}/tests/unit/io/test_pg_uv.c
              LABELS unit foundation TIMEOUT 30 ENV TM_PG_UV_TESTS=unit)
# Starts tests/lib/http_fixture.py itself: no ctest fixture needed.
tm_add_c_test(test_http_uv ${CMAKE_SOURCE_DIR}/tests/unit/io/test_http_uv.c
              LABELS integration foundation TIMEOUT 120)
