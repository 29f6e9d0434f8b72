# The API against hostile and careless clients: each finding is a test
# that reproduces it, so it stays fixed.
tm_add_test(itest_clock_resume LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/clock_resume.sh)
tm_add_test(itest_api_hostile LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/api_hostile.sh)
tm_add_test(itest_log_once LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/log_once.sh)
