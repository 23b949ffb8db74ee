# syntax=docker/dockerfile:1
# The `olm` binary and the bundled catalogs in a small non-root image.
#   docker build -t ghcr.io/olm-rs/olm:latest .
# One image runs every component (see manifests/): `olm run`, `olm packageserver`,
# `olm catalog serve --catalog community=/catalogs/community`.
#
# Where the public base images cannot be pulled, substitute equivalents with build arguments
# (`olm dev image build` does this with images it makes from Debian packages and the local
# Rust toolchain; see docs/real-node.md):
#   buildah bud --build-arg BUILD_IMAGE=... --build-arg RUNTIME_IMAGE=... .
# BUILD_IMAGE needs cargo/rustc (>= rust-version), a C compiler and make, CARGO_HOME=/usr/local/cargo;
# RUNTIME_IMAGE needs glibc, libgcc_s and CA certificates.
ARG BUILD_IMAGE=docker.io/library/rust:1-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

# --- build ---------------------------------------------------------------------------------
# rust-version in Cargo.toml is 1.89 (edition 2024); protobuf descriptors are compiled in Rust
# (protox), so no protoc is needed.
FROM ${BUILD_IMAGE} AS build
# The release profile's optimisation level (cargo reads it from the environment). 3 is cargo's
# own default; a test that only needs the image to run, not to be fast, may pass 0 to build in
# half the time.
ARG CARGO_PROFILE_RELEASE_OPT_LEVEL=3
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
# bench and tests are workspace members: cargo needs their manifests to load the workspace.
COPY bench ./bench
COPY tests ./tests
# .cargo/config.toml configures the allocator of the binary (jemalloc background purging).
COPY .cargo ./.cargo
# manifests/ is compiled in: `olm release` writes it as olm.yaml, `olm dev up` applies its user roles.
COPY manifests ./manifests
# Cache the registry and target dir between builds (BuildKit); copy the binary out of the cache.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p olm \
 && install -D -m 0755 target/release/olm /out/olm

# --- runtime -------------------------------------------------------------------------------
# distroless/cc: glibc + libgcc + CA certificates, no shell, user 65532 "nonroot".
FROM ${RUNTIME_IMAGE}
COPY --from=build /out/olm /usr/local/bin/olm
COPY catalogs /catalogs
USER 65532:65532
EXPOSE 8080 50051 5443
ENTRYPOINT ["/usr/local/bin/olm"]
CMD ["--help"]
