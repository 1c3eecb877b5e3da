# One image for every stormwatch service (gateway, ingest, alerts, simulate, dashboards, web).
# Stage 1 builds the wheel from the source folders; stage 2 installs that wheel -- the same artifact
# a user installs with pip -- with no source tree beside it. tests/deploy/test_packaging.py checks that
# every path copied here exists and that the commands run here exist in the installed wheel.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
# stormwatch/ links the top-level source folders into the one import namespace (stormwatch.gateway, ...).
COPY stormwatch ./stormwatch
COPY gateway ./gateway
COPY ingest ./ingest
COPY stores ./stores
COPY alerts ./alerts
COPY simulators ./simulators
COPY importers ./importers
COPY dashboards ./dashboards
COPY report ./report
COPY enforcement ./enforcement
COPY device_profiles ./device_profiles
COPY examples ./examples
COPY web ./web
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.11-slim
# stormwatch report lays its PDF out with WeasyPrint, which draws text with Pango (and a font)
RUN apt-get update \
    && apt-get install -y --no-install-recommends libpango-1.0-0 libpangoft2-1.0-0 fonts-dejavu-core \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /dist /tmp/dist
RUN pip install --no-cache-dir /tmp/dist/stormwatch-*.whl \
    && rm -rf /tmp/dist \
    && useradd --system --home-dir /var/lib/stormwatch stormwatch \
    && mkdir -p /var/lib/stormwatch /etc/stormwatch && chown stormwatch /var/lib/stormwatch
COPY deploy/site/simulated-site.sh /usr/local/bin/simulated-site
# The site file the compose services use (the packaged example; mount your own over it).
COPY examples/site.yaml /etc/stormwatch/site.yaml
WORKDIR /var/lib/stormwatch
USER stormwatch
ENV PYTHONUNBUFFERED=1
ENTRYPOINT ["stormwatch"]
CMD ["--help"]
