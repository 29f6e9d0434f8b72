# Reserved capacity (docs/clouds.md, "Reserved capacity"): a pool's
# reservations and Capacity Blocks, every test also labelled `reservation`.

# The keys' rules: ids in the cloud's format, dates, a reservation of
# another type or zone than its pool's, an expired block, overlapping
# blocks, a kind that cannot launch into reservations; each names its key.
tm_add_c_test(test_reservation_config ${CMAKE_SOURCE_DIR}/tests/unit/core/test_reservation_config.c
              LABELS unit foundation reservation TIMEOUT 60 LINK tarmac_core)

# The launch engine's offers (reservations first, a full one passed over,
# a pool that buys nothing past its reservations) on the simulated cloud,
# in memory (replay's) and in PostgreSQL (the live controller's).
tm_add_c_test(test_sim_reservation ${CMAKE_SOURCE_DIR}/tests/unit/providers/sim/test_sim_reservation.c
              LABELS integration foundation reservation FIXTURES pg TIMEOUT 120)

# The AWS provider against tests/lib/ec2_reservation_fake.py beside moto:
# launches into a reservation and a block, a full one falling over, a
# cancelled one noticed, bad reservations refused at start with EC2's answer.
tm_add_c_test(test_aws_reservation ${CMAKE_SOURCE_DIR}/tests/integration/test_aws_reservation.c
              LABELS integration aws reservation TIMEOUT 300)

# The controller end to end with a reservation against the fake and moto:
# bad reservations refused (check config, serve), nodes into the
# reservation then on demand past it, kill -9 in the launch path (KILLS,
# default 20), a cancellation noticed.
tm_add_test(itest_reservation_aws LABELS integration aws reservation FIXTURES pg TIMEOUT 900
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/reservation_aws_e2e.sh)
