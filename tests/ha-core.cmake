# High availability: a hung leader loses its lease (docs/ha.md).
tm_add_test(itest_ha_lease LABELS integration ha FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/ha_lease.sh)
# The API answers 503 fast while the database is away; Idempotency-Key.
tm_add_test(itest_ha_api_outage LABELS integration ha FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/ha_api_outage.sh)
# Bad database URLs: dead hosts among several, standbys only.
tm_add_test(itest_ha_bad_db LABELS integration ha FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/ha_bad_db.sh)
# A leader whose plan's reply it reads only after its lease ran out makes
# none of the plan's cloud calls; the successor carries the rows out.
tm_add_test(itest_ha_late_reply LABELS integration ha FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/ha_late_reply.sh)
