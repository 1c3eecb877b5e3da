#!/bin/sh
# One simulated site in one container: `stormwatch simulate --lockstep` serves the site's devices
# (Modbus TCP on 127.0.0.1, Modbus RTU and serial on pseudo-terminals -- these must share the
# container) and conducts the lockstep clock over MQTT (stormwatch/v1/<site>/clock/...);
# `stormwatch gateway --lockstep` polls them on that clock and publishes to the broker; ingest and
# alerts (other containers, --lockstep) follow the same clock. Simulated time moves when every one
# of them is done with the current instant: as fast as the machine allows, the same events on any
# machine; one that dies stops the clock (the simulator names it) and a restart continues the run.
# Exits with the simulator's status when the scenario ends (or either process dies).
#
# env: SITE_FILE (default /etc/stormwatch/site.yaml), SIM_WAIT_S (default 30: real seconds a silent
#      participant may take before the simulator names it), STORMWATCH_BROKER,
#      STORMWATCH_MQTT_USERNAME / STORMWATCH_MQTT_PASSWORD (stormwatch/runtime/mqtt.py), STATE_DIR.
set -eu
site="${SITE_FILE:-/etc/stormwatch/site.yaml}"
state="${STATE_DIR:-/var/lib/stormwatch}"
running="$state/site-running"
mkdir -p "$state/gateway"
rm -f "$running"

stormwatch simulate --site "$site" --lockstep --broker "${STORMWATCH_BROKER:?}" \
  --lockstep-wait-s "${SIM_WAIT_S:-30}" &
sim=$!
stormwatch gateway --site "$site" --lockstep --broker "${STORMWATCH_BROKER:?}" --state-dir "$state/gateway" &
gw=$!
trap 'kill -TERM "$sim" "$gw" 2>/dev/null' TERM INT
touch "$running"

status=0
while kill -0 "$sim" 2>/dev/null && kill -0 "$gw" 2>/dev/null; do
  sleep 1
done
rm -f "$running"
if ! kill -0 "$sim" 2>/dev/null; then
  wait "$sim" || status=$?
  kill -TERM "$gw" 2>/dev/null || true  # done with the clock's last instant: nothing left to send
  wait "$gw" || true
else
  echo "simulated-site.sh: the gateway stopped; stopping the simulator" >&2
  wait "$gw" || status=$?
  [ "$status" -ne 0 ] || status=1
  kill -TERM "$sim" 2>/dev/null || true
  wait "$sim" || true
fi
exit "$status"
