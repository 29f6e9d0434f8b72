# The API against hostile and careless clients (issue 18): each finding is
# a test that failed before its fix.
tm_add_test(itest_clock_resume LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/clock_resume.sh)
tm_add_test(itest_api_hostile LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/api_hostile.sh)
tm_add_test(itest_log_once LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/log_once.sh)
