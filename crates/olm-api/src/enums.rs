//! The two kinds of string enums used by the API types.
//!
//! * **Closed** enums (`closed_string_enum!`) are for spec fields that people write
//!   (install mode types, approval, source type, ...). An unknown value is a deserialisation
//!   error that lists the accepted values, and the generated CRD schema carries the same
//!   list as an `enum`, so the apiserver rejects a bad value when it is written. That is why
//!   a strict decode of an object read back from the cluster is safe.
//! * **Open** enums (`open_string_enum!`) are for values that controllers write (phases,
//!   reasons, condition types, step statuses, ...). Another version of OLM may write a value
//!   this one does not know; such a value decodes to `Other(String)` and serialises back
//!   unchanged, so one odd status never makes a whole object (or a whole list) unreadable.
//!   Their schema is a plain `string`, as upstream's.

/// A closed string enum: exact upstream strings, strict decoding, schema `enum`.
macro_rules! closed_string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
            ::serde::Serialize, ::serde::Deserialize, ::schemars::JsonSchema,
        )]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $value)] $variant, )+
        }

        impl $name {
            /// Every accepted value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The exact string used on the wire.
            pub fn as_str(&self) -> &'static str {
                match self {
                    $( $name::$variant => $value, )+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::enums::UnknownValue;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $( $value => Ok($name::$variant), )+
                    other => Err($crate::enums::UnknownValue {
                        type_name: stringify!($name),
                        value: other.to_owned(),
                        expected: &[$($value),+],
                    }),
                }
            }
        }
    };
}

/// An open string enum: exact upstream strings plus `Unknown(String)` for anything else.
macro_rules! open_string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this version does not know. Kept verbatim so that it round-trips.
            Other(String),
        }

        impl $name {
            /// The values this version knows, in declaration order.
            pub const KNOWN: &'static [&'static str] = &[$($value),+];

            /// The exact string used on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $value, )+
                    $name::Other(other) => other.as_str(),
                }
            }

            /// Maps a wire string to a variant; never fails.
            pub fn parse(s: &str) -> Self {
                match s {
                    $( $value => $name::$variant, )+
                    other => $name::Other(other.to_owned()),
                }
            }

            /// Whether this is one of the values this version knows.
            pub fn is_known(&self) -> bool {
                !matches!(self, $name::Other(_))
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                $name::parse(s)
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = <::std::borrow::Cow<'de, str> as ::serde::Deserialize>::deserialize(deserializer)?;
                Ok($name::parse(&s))
            }
        }

        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                ::schemars::json_schema!({ "type": "string" })
            }
        }
    };
}

pub(crate) use closed_string_enum;
pub(crate) use open_string_enum;

/// A string that is not one of a closed enum's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {type_name} {value:?}; expected one of {}", expected.join(", "))]
pub struct UnknownValue {
    /// The Rust type that was being parsed.
    pub type_name: &'static str,
    /// The offending value.
    pub value: String,
    /// The accepted values.
    pub expected: &'static [&'static str],
}
