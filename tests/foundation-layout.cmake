# The layering rule (docs/architecture.md): no file includes a folder
# it may not (scripts/check-includes.sh; scripts/test.sh runs it first too).
tm_add_test(check_includes LABELS unit foundation TIMEOUT 60
            COMMAND sh ${CMAKE_SOURCE_DIR}/scripts/check-includes.sh ${CMAKE_SOURCE_DIR})
