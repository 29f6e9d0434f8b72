# providers/local/: `kind: local`, nodes that are processes here.
tm_add_c_test(test_local_provider ${CMAKE_SOURCE_DIR}/tests/unit/providers/local/test_local_provider.c
              LABELS unit agent TIMEOUT 60)
