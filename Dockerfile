# kuberay-tpu-webhook container image: the admission server and the webhook-dryrun CLI.
#
#   docker build -t <registry>/kuberay-tpu-webhook:0.3.0 .
#
# Stage 1 builds on Debian 12 with the project's own setup script (build dependencies only);
# stage 2 is debian:bookworm-slim with exactly the runtime libraries the two binaries link (the
# list is checked against `ldd` of a build by test/deploy/check_dockerfile.py), no compiler or
# headers, running as an unprivileged numeric user so runAsNonRoot can verify it.

FROM debian:bookworm AS build
WORKDIR /src
# The setup script alone first, so the package layer is reused while only sources change.
COPY scripts/setup.sh scripts/setup.sh
RUN SETUP_MINIMAL=1 bash scripts/setup.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release \
        -DWEBHOOK_BUILD_TESTS=OFF -DWEBHOOK_BUILD_BENCH=OFF \
    && cmake --build /build -j"$(nproc)" \
    && cmake --install /build --prefix /staging --strip \
    && /staging/bin/kuberay-tpu-webhook --version

FROM debian:bookworm-slim AS runtime
LABEL org.opencontainers.image.title="kuberay-tpu-webhook" \
      org.opencontainers.image.description="Admission webhook for KubeRay TPU worker Pods and RayClusters"
# One package for each shared library `ldd` reports for the two binaries, nothing else.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libbrotli1 \
        libc6 \
        libcpp-httplib0.11 \
        libfmt9 \
        libgcc-s1 \
        libjemalloc2 \
        libsimdjson14 \
        libspdlog1.10 \
        libssl3 \
        libstdc++6 \
        libyaml-cpp0.7 \
        zlib1g \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
COPY --from=build /staging/bin/kuberay-tpu-webhook /staging/bin/webhook-dryrun /usr/local/bin/
# 65532: the conventional "nonroot" id; the Helm chart and kustomize base run as it too.
USER 65532:65532
# HTTPS admission endpoints (/mutate, /validate) and plain-HTTP health (/healthz, /readyz, /metrics).
EXPOSE 9443 8081
ENTRYPOINT ["/usr/local/bin/kuberay-tpu-webhook"]
