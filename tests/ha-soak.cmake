# High availability: the chaos soak's short form (scripts/soak.sh; the long
# form, --minutes 30, is a separate command: docs/testing.md).  One fault of each
# kind in an order drawn from a fixed seed, under the API workload; the
# invariants table is in the test's output.  About a minute and a half, most
# of it setting up the primary and its synchronous standby, so it runs in
# the plain pass only (label slow).
tm_add_test(itest_ha_soak LABELS integration ha slow FIXTURES pg TIMEOUT 300
            COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/soak.sh --minutes 0.3 --seed 1)
