# kuberay-tpu-webhook container image: the admission server, the webhook-dryrun CLI and the
# kubectl-tpu_slice plugin.
#
#   docker build -t <registry>/kuberay-tpu-webhook:0.3.0 .
#
# Stage 1 builds on Debian 12 (BASE_IMAGE, pinned by digest) with the project's own setup script
# (build dependencies only) and lays out the image's whole root filesystem with
# scripts/stage-image-root.sh. Stage 2 is FROM scratch and holds that tree and nothing else,
# about 17 MB on amd64:
#   /usr/local/bin/kuberay-tpu-webhook, webhook-dryrun, kubectl-tpu_slice   (stripped)
#   the dynamic loader and every shared library `ldd` reports for the binaries, copied from
#     Debian 12 to the paths ldd reports (glibc, libstdc++, libgcc_s, OpenSSL, cpp-httplib,
#     yaml-cpp, spdlog, fmt, simdjson, jemalloc, zlib, brotli)
#   /etc/passwd, /etc/group (root, and nonroot = 65532), /etc/nsswitch.conf, an empty /tmp
#   what scanners read (Trivy, Grype, Artifact Analysis): /etc/os-release, /etc/debian_version,
#     /var/lib/dpkg/status.d/<package> for every Debian package a staged file comes from (as
#     distroless images have them), each package's /usr/share/doc/<package>/copyright, and an
#     SPDX 2.3 SBOM, /usr/share/sbom/kuberay-tpu-webhook.spdx.json
# There is no shell, no package manager, no CA bundle (the server trusts only the CA of its
# service account or kubeconfig) and no time zone data (logs are in UTC). The library list comes
# from ldd at build time, and the build fails unless every binary starts (`--version`) from the
# staged tree with its own loader and libraries alone. test/deploy/check_dockerfile.py checks
# this file and runs the staging script on a local build.
#
# Without a shell, `kubectl exec ... -- sh` cannot work. Debug with an ephemeral container that
# joins the webhook's process namespace (the server is PID 1, its files under /proc/1/root):
#   kubectl debug -it POD --image=debian:12-slim --target=kuberay-tpu-webhook --profile=general
# and run the CLI from the image with
#   docker run --rm --entrypoint /usr/local/bin/webhook-dryrun IMAGE --help

# The build base, pinned by digest: a rebuild starts from the same image whatever the tag now
# points at. (The packages setup.sh installs still come from Debian's archive at build time;
# the image records their versions in status.d and the SBOM.) To move it to the current
# bookworm-slim (docs/install.md, "Build and push the image"):
#   docker buildx imagetools inspect debian:bookworm-slim --format '{{json .Manifest.Digest}}'
# and replace the digest below. `--build-arg BASE_IMAGE=...` builds on another copy of Debian 12
# (a mirror, or an image already loaded into a builder that cannot pull).
ARG BASE_IMAGE=debian:bookworm-slim@sha256:3783cc01769c7b2b1b83a5c5ad96c815348e28ed7da68e2e3687004faa906251

FROM ${BASE_IMAGE} AS build
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
# The runtime root: the binaries, their libraries and loader (from ldd), the user and group
# files, the package records, copyrights and SBOM; fails unless every binary starts from it
# alone and every copied file belongs to a Debian package.
RUN bash scripts/stage-image-root.sh /rootfs \
        /staging/bin/kuberay-tpu-webhook /staging/bin/webhook-dryrun /staging/bin/kubectl-tpu_slice

FROM scratch AS runtime
LABEL org.opencontainers.image.title="kuberay-tpu-webhook" \
      org.opencontainers.image.description="Admission webhook for KubeRay TPU worker Pods and RayClusters"
COPY --from=build /rootfs/ /
# 65532: the conventional "nonroot" id (named in the image's /etc/passwd); the Helm chart and
# kustomize base run as it too.
USER 65532:65532
# HTTPS admission endpoints (/mutate, /validate) and plain-HTTP health (/healthz, /readyz, /metrics).
EXPOSE 9443 8081
ENTRYPOINT ["/usr/local/bin/kuberay-tpu-webhook"]
