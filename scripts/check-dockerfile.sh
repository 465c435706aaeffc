#!/usr/bin/env bash
# Runs the Dockerfile's build step outside a container (CI has no container engine), so a
# Dockerfile that no longer builds fails CI instead of the next image build:
#
#   1. the ARG defaults agree with Cargo.toml: VERSION with the package version, the rust image's
#      tag with rust-version (the toolchain that builds the image is the one the crate declares);
#   2. the builder stage's RUN instruction is taken from the Dockerfile as written (continuation
#      lines joined, the BuildKit --mount flags dropped) and run with bash, with the build
#      arguments as environment variables (VERSION, and REVISION = this checkout's commit), in a
#      clean copy of the tracked tree, the build context minus .dockerignore;
#   3. the binary the runtime stage copies (out/placer) must exist and report that commit.
#
# Build outputs: the copy is new every run, so cargo always compiles placer itself from the copied
# sources (a new package path is a new fingerprint). Its target directory is a symlink into a
# cache outside the git tree, like the Dockerfile's cache mount, so the registry dependencies are
# compiled once: they are keyed by version, features, profile and compiler, all fixed by the same
# `--locked` command and Cargo.lock, so reusing them cannot hide a change in the tree. Set
# PLACER_DOCKERFILE_COLD=1 to use a fresh target directory instead.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
cache_root=${PLACER_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/placer-e2e}

fail() { echo "check-dockerfile: $*" >&2; exit 1; }

# 1. ARG defaults.
arg_default() { sed -nE "s/^ARG $1=(.*)$/\1/p" Dockerfile | head -n 1; }
package_version=$(sed -nE '0,/^version = /s/^version = "(.*)"$/\1/p' Cargo.toml)
rust_version=$(sed -nE 's/^rust-version = "(.*)"$/\1/p' Cargo.toml)
[ "$(arg_default VERSION)" = "$package_version" ] \
  || fail "ARG VERSION=$(arg_default VERSION) but Cargo.toml's version is $package_version"
case "$(arg_default RUST_IMAGE)" in
  *:"$rust_version".*-*|*:"$rust_version"-*) ;;
  *) fail "ARG RUST_IMAGE=$(arg_default RUST_IMAGE) is not rust $rust_version (Cargo.toml's rust-version)" ;;
esac

# 2. The builder stage's RUN instruction(s), as written.
steps=$(awk '
  /^FROM .* AS builder$/ { stage = 1; next }
  /^FROM / { stage = 0 }
  stage && /^RUN / { run = 1 }
  stage && run {
    line = $0
    more = sub(/\\[[:space:]]*$/, "", line)
    buf = buf line " "
    if (!more) { print buf; buf = ""; run = 0 }
  }' Dockerfile | sed -E 's/^RUN[[:space:]]+//; s/--mount=[^[:space:]]+[[:space:]]*//g')
[ -n "$steps" ] || fail "no RUN instruction in the builder stage"
grep -q -- "--locked" <<<"$steps" || fail "the build step does not use --locked: $steps"

copy=$(mktemp -d "${TMPDIR:-/tmp}/placer-dockerfile.XXXXXX")
trap 'rm -rf "$copy"' EXIT
# The tracked files as they are in the work tree (a fresh clone in CI), minus .dockerignore's
# patterns (as regular expressions: `**/` any directories, `*` within one, a trailing `/` a
# directory and all below it).
ignored="$copy.ignore"
trap 'rm -rf "$copy" "$ignored"' EXIT
sed -E '/^[[:space:]]*(#|$)/d; s|^/||; s|\.|\\.|g; s|\*\*/|@@|g; s|\*|[^/]*|g; s|@@|(.*/)?|g' .dockerignore \
  | sed -E '/\/$/!s|$|(/\|$)|; s|^|^|' >"$ignored"
git ls-files -z --cached \
  | grep -zv -E -f "$ignored" \
  | tar --null --files-from=- -cf - \
  | tar -xf - -C "$copy"
[ -f "$copy/Cargo.toml" ] && [ -f "$copy/Cargo.lock" ] || fail "copying the tree to $copy failed"
if [ "${PLACER_DOCKERFILE_COLD:-0}" = 1 ]; then
  target="$copy/.target"
else
  target="$cache_root/dockerfile-target"
fi
mkdir -p "$target"
ln -s "$target" "$copy/target"

export VERSION="$package_version"
REVISION=$(git rev-parse --short=12 HEAD)
export REVISION
echo "check-dockerfile: running the builder stage's step in $copy:" >&2
echo "  $steps" >&2
(cd "$copy" && bash -euo pipefail -c "$steps") || fail "the Dockerfile's build step failed"

# 3. What the runtime stage copies.
[ -x "$copy/out/placer" ] || fail "the build step left no out/placer for the runtime stage"
reported=$("$copy/out/placer" --version)
[ "$reported" = "placer $package_version ($REVISION)" ] \
  || fail "out/placer --version says '$reported', expected 'placer $package_version ($REVISION)'"
echo "check-dockerfile: ok ($reported) in $(( $(date +%s) - start ))s"
