# High availability: the database server dies; a streaming standby is
# promoted (docs/ha.md).  Each run starts its own primary and standby.
foreach(mode sync async)
  tm_add_test(itest_ha_failover_${mode} LABELS integration ha FIXTURES pg TIMEOUT 150
              COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/ha_failover.sh ${mode})
endforeach()
