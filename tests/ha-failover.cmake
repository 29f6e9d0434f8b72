# High availability: the database server dies; a streaming standby is
# promoted (docs/ha.md).  Each run starts its own primary and standby.
# The asynchronous run differs from the synchronous one in the standby's
# settings, not in tarmac's code, so the sanitizer pass runs only the
# synchronous one (label slow: plain pass only, scripts/test.sh).
tm_add_test(itest_ha_failover_sync LABELS integration ha FIXTURES pg TIMEOUT 150
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/ha_failover.sh sync)
tm_add_test(itest_ha_failover_async LABELS integration ha slow FIXTURES pg TIMEOUT 150
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/ha_failover.sh async)
# The same failure under a real failover tool: Patroni (with etcd) manages
# the primary and its synchronous standby and promotes it itself
# (tests/lib/patroni_pair.sh), after the primary's postgres is killed
# (Patroni on that server lives on) and after the whole server is (Patroni
# too: the leader key expires first).  Same tarmac code as the synchronous
# run above, so the sanitizer pass leaves them out (label slow).
tm_add_test(itest_ha_patroni LABELS integration ha slow FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/ha_patroni.sh postgres)
tm_add_test(itest_ha_patroni_node LABELS integration ha slow FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/ha_patroni.sh node)
