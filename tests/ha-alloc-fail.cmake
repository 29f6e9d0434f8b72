# Allocation failure injection (tests/unit/alloc_fail/): every allocation of
# the config loader, the API body parsers, the EC2 answer parser and a
# scheduler pass fails in turn.  The wraps reach the code of the static
# libraries linked into the binary; cJSON and jansson are hooked at run time.
tm_add_c_test(test_alloc_fail ${CMAKE_SOURCE_DIR}/tests/unit/alloc_fail/test_alloc_fail.c
              LABELS unit ha TIMEOUT 300)
target_sources(test_alloc_fail PRIVATE ${CMAKE_SOURCE_DIR}/tests/unit/alloc_fail/alloc_fail.c)
target_include_directories(test_alloc_fail PRIVATE ${CMAKE_SOURCE_DIR})
target_link_options(test_alloc_fail PRIVATE
  -Wl,--wrap=malloc -Wl,--wrap=calloc -Wl,--wrap=realloc -Wl,--wrap=strdup
  -Wl,--wrap=strndup -Wl,--wrap=vasprintf)
