# syntax=docker/dockerfile:1
# placer: multi-stage release build -> distroless (glibc) non-root runtime image.
#   docker build -t placer:0.1.0 .
#   docker run --rm -p 8888:8888 -v "$PWD:/etc/placer:ro" placer:0.1.0 \
#     serve --policy /etc/placer/policy.yaml --snapshot /etc/placer/examples/cluster.yaml
# In Kubernetes the policy ConfigMap is mounted at /etc/placer (see manifests/).

ARG RUST_VERSION=1.95

# Dependency-cache skeleton: the manifests, plus a dummy `fn main() {}` for every Rust
# file (an empty lib.rs), so that the next stage's layer stays cached until Cargo.toml or
# Cargo.lock change. Stubbing every file, not just src/main.rs, keeps declared
# [[bench]] / [[example]] targets loadable.
FROM rust:${RUST_VERSION}-bookworm AS planner
WORKDIR /src
COPY . .
RUN set -eu; mkdir -p /skeleton; \
    find . -path ./target -prune -o \( -name Cargo.toml -o -name Cargo.lock \) -print \
      | while read -r f; do mkdir -p "/skeleton/$(dirname "$f")"; cp "$f" "/skeleton/$f"; done; \
    find . -path ./target -prune -o -name '*.rs' -print \
      | while read -r f; do \
          mkdir -p "/skeleton/$(dirname "$f")"; \
          case "$f" in */lib.rs) echo '//! dependency-cache stub' ;; *) echo 'fn main() {}' ;; esac > "/skeleton/$f"; \
        done

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
# 1) Dependencies only (cached while Cargo.toml / Cargo.lock are unchanged).
COPY --from=planner /skeleton/ ./
RUN cargo build --release --locked
# 2) The real sources. Touch them: COPY keeps the context's modification times, which
#    can be older than the stub build, and cargo must not take the stubs as up to date.
COPY . .
RUN find . -path ./target -prune -o -name '*.rs' -exec touch {} + \
 && cargo build --release --locked \
 && cp target/release/placer /placer

# Runtime: glibc, libgcc, CA certificates and tzdata; no shell; user nonroot (65532).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /placer /placer
USER 65532:65532
EXPOSE 8888
ENTRYPOINT ["/placer"]
CMD ["serve", "--policy", "/etc/placer/policy.yaml"]
