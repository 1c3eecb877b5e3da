#!/bin/sh
# Write Mosquitto's password file from the MQTT_*_PASSWORD variables (.env), hashed by
# mosquitto_passwd. Run at every broker start (docker-compose.yml), so changing .env and
# restarting the broker changes the passwords; the file is never committed.
#
# usage: make-passwd.sh PASSWORD_FILE
# needs: MQTT_INGEST_PASSWORD, MQTT_ALERTS_PASSWORD, MQTT_HEALTHCHECK_PASSWORD, MQTT_WEB_PASSWORD,
#        MQTT_GATEWAY_USER (the gateway id, e.g. gw-riverside-1), MQTT_GATEWAY_PASSWORD
set -eu
out="${1:?usage: make-passwd.sh PASSWORD_FILE}"
tmp="$out.new"
rm -f "$tmp"
mosquitto_passwd -c -b "$tmp" ingest "${MQTT_INGEST_PASSWORD:?MQTT_INGEST_PASSWORD not set}"
mosquitto_passwd -b "$tmp" alerts "${MQTT_ALERTS_PASSWORD:?MQTT_ALERTS_PASSWORD not set}"
mosquitto_passwd -b "$tmp" healthcheck "${MQTT_HEALTHCHECK_PASSWORD:?MQTT_HEALTHCHECK_PASSWORD not set}"
mosquitto_passwd -b "$tmp" web "${MQTT_WEB_PASSWORD:?MQTT_WEB_PASSWORD not set}"
mosquitto_passwd -b "$tmp" "${MQTT_GATEWAY_USER:?MQTT_GATEWAY_USER not set}" \
  "${MQTT_GATEWAY_PASSWORD:?MQTT_GATEWAY_PASSWORD not set}"
chmod 0600 "$tmp"
if [ "$(id -u)" = 0 ] && id mosquitto >/dev/null 2>&1; then
  chown mosquitto:mosquitto "$tmp"
fi
mv "$tmp" "$out"
echo "make-passwd.sh: wrote $out (ingest, alerts, healthcheck, web, $MQTT_GATEWAY_USER)"
