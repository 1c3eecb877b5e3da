#!/bin/bash
# Run once by the influxdb:2.7 image after its initial setup (/docker-entrypoint-initdb.d):
# map the InfluxQL database/retention policy "$INFLUXDB_V1_DB/autogen" onto the bucket, so
# Grafana's InfluxQL dashboards (dashboards/json) query InfluxDB 2.x unchanged.
set -euo pipefail
influx v1 dbrp create \
  --org "${DOCKER_INFLUXDB_INIT_ORG}" \
  --token "${DOCKER_INFLUXDB_INIT_ADMIN_TOKEN}" \
  --bucket-id "${DOCKER_INFLUXDB_INIT_BUCKET_ID}" \
  --db "${INFLUXDB_V1_DB}" \
  --rp autogen \
  --default
echo "10-dbrp.sh: InfluxQL database ${INFLUXDB_V1_DB}/autogen -> bucket ${DOCKER_INFLUXDB_INIT_BUCKET}"
