#!/bin/sh
# One simulated site in one container: `stormwatch simulate` serves the site's devices (Modbus TCP
# on 127.0.0.1, Modbus RTU and serial on pseudo-terminals -- these must share the container) and
# writes its scenario clock to $STATE_DIR/sim-clock.json; `stormwatch gateway` polls them on that
# clock and publishes to the broker; ingest and alerts (other containers) read the same clock file
# from the shared volume (STORMWATCH_CLOCK_FILE in docker-compose.yml), so every service runs on
# one simulated time. Simulated time reaches the scenario start SIM_START_DELAY_S real seconds after
# the clock is written (services waiting for it connect first). Exits with the simulator's status
# when the scenario ends (or either process dies).
#
# env: SITE_FILE (default /etc/stormwatch/site.yaml), SIM_SPEED (default 60), SIM_START_DELAY_S
#      (default 5), STORMWATCH_BROKER, STORMWATCH_MQTT_USERNAME / STORMWATCH_MQTT_PASSWORD
#      (stormwatch/runtime/mqtt.py), STATE_DIR.
set -eu
site="${SITE_FILE:-/etc/stormwatch/site.yaml}"
state="${STATE_DIR:-/var/lib/stormwatch}"
clock="$state/sim-clock.json"
mkdir -p "$state/gateway"
rm -f "$clock"

stormwatch simulate --site "$site" --speed "${SIM_SPEED:-60}" --clock-file "$clock" \
  --start-delay-s "${SIM_START_DELAY_S:-5}" &
sim=$!
waited=0
while [ ! -s "$clock" ]; do
  if ! kill -0 "$sim" 2>/dev/null; then
    wait "$sim" || exit $?
    exit 1
  fi
  waited=$((waited + 1))
  [ "$waited" -le 300 ] || { echo "simulated-site.sh: no clock file after 60 s" >&2; kill "$sim"; exit 1; }
  sleep 0.2
done

stormwatch gateway --site "$site" --broker "${STORMWATCH_BROKER:?}" --state-dir "$state/gateway" \
  --clock-file "$clock" &
gw=$!
trap 'kill -TERM "$sim" "$gw" 2>/dev/null' TERM INT

status=0
while kill -0 "$sim" 2>/dev/null && kill -0 "$gw" 2>/dev/null; do
  sleep 1
done
if ! kill -0 "$sim" 2>/dev/null; then
  wait "$sim" || status=$?
  kill -TERM "$gw" 2>/dev/null || true
  wait "$gw" || true
else
  echo "simulated-site.sh: the gateway stopped; stopping the simulator" >&2
  wait "$gw" || status=$?
  [ "$status" -ne 0 ] || status=1
  kill -TERM "$sim" 2>/dev/null || true
  wait "$sim" || true
fi
exit "$status"
