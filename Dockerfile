# One image for every stormwatch service (gateway, ingest, alerts, simulate, dashboards).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY stormwatch ./stormwatch
COPY gateway ./gateway
COPY ingest ./ingest
COPY alerts ./alerts
COPY simulators ./simulators
COPY dashboards ./dashboards
COPY device_profiles ./device_profiles
COPY examples ./examples
COPY deploy/site/simulated-site.sh /usr/local/bin/simulated-site
# Editable install: profiles (device_profiles/), rule packs and scenarios are read from /app.
RUN pip install --no-cache-dir -e . \
    && useradd --system --home-dir /var/lib/stormwatch stormwatch \
    && mkdir -p /var/lib/stormwatch && chown stormwatch /var/lib/stormwatch
USER stormwatch
ENV PYTHONUNBUFFERED=1 STORMWATCH_PROFILES=/app/device_profiles
ENTRYPOINT ["stormwatch"]
CMD ["--help"]
