# Prometheus /metrics, in a fragment of its own so that it changes apart
# from the service fragment.  test_api checks every
# family against the database; these check the controller's counters
# alone, then the real binary: a sim cloud short of capacity (provider
# errors by kind), its ticks, leadership, node history and heartbeat
# utilisation, read through tests/lib/prom_parse.py.
tm_add_c_test(test_fleet_stats ${CMAKE_SOURCE_DIR}/tests/unit/api/test_fleet_stats.c LABELS unit service
              TIMEOUT 60)
tm_add_test(itest_metrics LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/metrics.sh)
