//! operator-registry's gRPC API (`api.Registry`): the generated types and stubs ([`pb`]) and the
//! model → wire conversions ([`convert`]) that make our answers the same as `opm serve`'s, and
//! the packages a server left out, told beside its listing ([`left_out`]).
//! The catalog server (`olm-registry`) serves them; the catalog clients read them.

pub mod convert;
pub mod left_out;
pub mod pb;
