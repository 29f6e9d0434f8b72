# The README's run command: its PostgreSQL setup path from a clone in a 0700
# folder (scripts/demo_db.sh), and the refusals it gives.  It starts its own
# clusters, so it needs no fixture.
tm_add_test(itest_demo_setup LABELS integration foundation slow TIMEOUT 240
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/demo_setup.sh)
