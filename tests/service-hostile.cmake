# The API against hostile and careless clients: each case is one a review
# found the server getting wrong, and each test failed before its fix.
tm_add_test(itest_clock_resume LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/clock_resume.sh)
tm_add_test(itest_api_hostile LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/api_hostile.sh)
tm_add_test(itest_log_once LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/log_once.sh)
