# syntax=docker/dockerfile:1.7
# placer: release build -> distroless (glibc) non-root runtime image.
#   docker build -t placer:0.1.0 \
#     --build-arg VERSION=0.1.0 --build-arg REVISION="$(git rev-parse --short=12 HEAD)" .
#   docker run --rm -p 8888:8888 -v "$PWD:/etc/placer:ro" placer:0.1.0 \
#     serve --policy /etc/placer/policy.yaml --snapshot /etc/placer/examples/cluster.yaml
# In Kubernetes the policy ConfigMap is mounted at /etc/placer (see charts/placer).
#
# The build compiles the real sources, with cache mounts for cargo's registry and target
# directory instead of a stub-source dependency layer (a stub `fn main() {}` fails the crate's
# `missing_docs = "deny"`, and stubs drift from the real targets). CI has no container engine:
# scripts/check-dockerfile.sh runs the builder stage's RUN step below, as written, on a clean
# copy of the tree, and checks the ARG defaults against Cargo.toml.
#
# Base images are pinned by version tag. The rust tag names the exact toolchain (Cargo.toml's
# rust-version); distroless publishes no version tags, and no registry is reachable where this
# file is maintained, so no digest could be verified: pin one where you build, e.g.
#   --build-arg RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot@sha256:<digest>
# (`docker buildx imagetools inspect gcr.io/distroless/cc-debian12:nonroot` prints it).

ARG RUST_IMAGE=docker.io/library/rust:1.95.0-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${RUST_IMAGE} AS builder
# The crate's version and the commit: OCI labels below, and `placer_build_info` /
# `placer --version` through build.rs, which reads REVISION as PLACER_GIT_COMMIT.
ARG VERSION=0.1.0
ARG REVISION=unknown
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    PLACER_GIT_COMMIT="$REVISION" cargo build --release --locked --bin placer \
 && mkdir -p out && cp target/release/placer out/placer

FROM ${RUNTIME_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="placer" \
      org.opencontainers.image.description="Kubernetes scheduler extender and standalone scheduler" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# Runtime: glibc, libgcc, CA certificates and tzdata; no shell; user nonroot (65532).
COPY --from=builder /src/out/placer /placer
USER 65532:65532
EXPOSE 8888
ENTRYPOINT ["/placer"]
CMD ["serve", "--policy", "/etc/placer/policy.yaml"]
