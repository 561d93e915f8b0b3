# The controller image. The build stage uses the same scripts as CI
# (.ci/install-deps, .ci/build), so the image and the tested build cannot drift.
#
# Rebuilds are fast: the packages are a layer of their own (it changes only with
# .ci/install-deps), and compiling goes through ccache, whose directory is a
# cache mount that outlives the build (BuildKit and podman/buildah both keep it),
# so a changed source file recompiles that file only. The build directory is
# dropped in the same step, so the layer holds just the two binaries.
# .dockerignore lists what the build reads; nothing else reaches the context.
FROM debian:bookworm AS build
WORKDIR /src
COPY .ci/install-deps .ci/install-deps
RUN .ci/install-deps --build-only
COPY . .
# The commit the binaries report (the context has no .git); test/image/build passes it.
ARG GIT_COMMIT=""
RUN --mount=type=cache,target=/ccache,id=resourceslice-controller-ccache \
    CCACHE_DIR=/ccache CCACHE_COMPILERCHECK=content .ci/build /build -Dbuildtype=release -Dtests=false -Db_lto=false \
      -Dgit_commit="$GIT_COMMIT" \
 && strip -o /resourceslice-controller /build/controller/resourceslice-controller \
 && strip -o /resourceslicectl /build/controller/ctl/resourceslicectl \
 && rm -rf /build

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
