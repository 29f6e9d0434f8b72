# The README's run command: its PostgreSQL setup path from a clone in a 0700
# folder (scripts/demo_db.sh), and the refusals it gives.  It starts its own
# clusters, so it needs no fixture.
tm_add_test(itest_demo_setup LABELS integration foundation slow TIMEOUT 240
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/demo_setup.sh)

# The README's run command on the local provider, shortened
# (TARMAC_DEMO_SHORT=1, about 45 s): real agents and jobs, the two-node
# exchange, the spot job's resume from its checkpoint on another node, the
# closing table.  slow: it stays out of the ASan pass (scripts/test.sh).
tm_add_test(itest_demo_local LABELS integration foundation slow TIMEOUT 240 FIXTURES pg
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/demo_local.sh)
