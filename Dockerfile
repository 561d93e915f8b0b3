# The controller image. The build stage uses the same scripts as CI
# (.ci/install-deps, .ci/build), so the image and the tested build cannot drift.
FROM debian:bookworm AS build
WORKDIR /src
COPY . .
RUN .ci/install-deps --build-only \
 && .ci/build /build -Dbuildtype=release -Dtests=false -Db_lto=false \
 && strip -o /resourceslice-controller /build/controller/resourceslice-controller \
 && strip -o /resourceslicectl /build/controller/ctl/resourceslicectl

# Debian ships cpprestsdk, prometheus-cpp and yaml-cpp as shared libraries
# only, so the runtime stage is the same Debian release with just those libraries.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates libcpprest2.10 libprometheus-cpp-core1.0 libssl3 libyaml-cpp0.7 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /resourceslice-controller /usr/local/bin/resourceslice-controller
# The operator CLI, for `kubectl exec ... -- resourceslicectl get pools`.
COPY --from=build /resourceslicectl /usr/local/bin/resourceslicectl
LABEL org.opencontainers.image.title="resourceslice-controller" \
      org.opencontainers.image.description="Publishes DRA drivers' device pools as Kubernetes ResourceSlices" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/resourceslice-controller"]
