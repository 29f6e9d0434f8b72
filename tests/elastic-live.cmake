# Spot interruptions in the live controller: notices, checkpoints, requeues
# and the GPU time lost (controller/reconcile.c, migrations/0006_spot.sql).
tm_add_c_test(test_reconcile_spot ${CMAKE_SOURCE_DIR}/tests/unit/test_reconcile_spot.c
              LABELS unit elastic)
