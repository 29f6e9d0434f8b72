# High availability: the chaos soak's short form (scripts/soak.sh; the long
# form is a separate command, README.md).  One fault of each kind, a fixed
# seed; the invariants table is in the test's output.
tm_add_test(itest_ha_soak LABELS integration ha FIXTURES pg TIMEOUT 180
            COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/soak.sh --minutes 0.3 --seed 1)
