//! Generated types and service stubs of operator-registry's `api` package.

#![allow(clippy::all, missing_docs, rust_2018_idioms)]

tonic::include_proto!("api");

/// Encoded `FileDescriptorSet` of registry.proto (with its imports), for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/registry_descriptor.bin"));
