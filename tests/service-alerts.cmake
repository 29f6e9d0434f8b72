# Alerts, in a fragment of their own so that they change apart from the
# service fragment: the conditions as known answers,
# then the real binary against a loopback webhook that fails twice before
# accepting (tests/lib/webhook_receiver.py).
tm_add_c_test(test_alerts ${CMAKE_SOURCE_DIR}/tests/unit/reconcile/test_alerts.c LABELS unit service TIMEOUT 60 LINK tarmac_reconcile)
tm_add_test(itest_alerts LABELS integration service FIXTURES pg TIMEOUT 180
            COMMAND ${CMAKE_SOURCE_DIR}/tests/integration/alerts.sh)
# The alerter's retry schedule and webhook body (includes the .c).
tm_add_c_test(test_alert_webhook ${CMAKE_SOURCE_DIR}/tests/unit/daemon/test_alert_webhook.c LABELS unit service
              TIMEOUT 60)
