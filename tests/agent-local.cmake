# providers/local/: `kind: local`, nodes that are processes here.
tm_add_c_test(test_local_provider ${CMAKE_SOURCE_DIR}/tests/unit/providers/local/test_local_provider.c
              LABELS unit agent TIMEOUT 60)
# `tarmac local ...`, the kind's own command through its registry row.
tm_add_test(test_local_command LABELS unit agent TIMEOUT 30
            COMMAND ${CMAKE_SOURCE_DIR}/tests/unit/providers/local/local_command.sh)
