# providers/azure end to end against the loopback Azure fake (HTTPS, the
# swagger extract enforced; tests/lib/azure_fake.py).

# check azure exit codes, on-demand and spot pools, jobs run, VMs with their
# NICs and disks released after grace, no secret or token in any log.
tm_add_test(itest_azure_e2e LABELS integration azure FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/azure_e2e.sh)

# A zone short (async ZonalAllocationFailed) falling back to the next zone
# through 429s and a 503.
tm_add_test(itest_azure_zone LABELS integration azure FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/azure_zone.sh)

# A spot eviction: the node interrupted, the job requeued and finished.
tm_add_test(itest_azure_evict LABELS integration azure FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/azure_evict.sh)

# kill -9 during launches and deletions, then restart: no duplicate VM, no
# orphan VM, NIC or disk, no lost job (KILLS=6 here; the soak is KILLS=50).
tm_add_test(itest_azure_kill9 LABELS integration azure slow FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/azure_kill9.sh)

# The fake held to the official clients (@azure/identity, @azure/arm-compute,
# pinned; npm-installed into a temporary folder, or TM_AZURE_NPM_DIR).
tm_add_test(itest_azure_sdk LABELS integration azure slow FIXTURES pg TIMEOUT 300
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/azure_sdk.sh)

# The certificate credential (azure.client_certificate, no secret anywhere):
# check azure 0/3/1, a forged assertion refused by the fake, jobs run on VMs
# bought with assertion tokens, no line of the private key in any log.
tm_add_test(itest_azure_cert LABELS integration azure FIXTURES pg TIMEOUT 120
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/azure_cert.sh)
