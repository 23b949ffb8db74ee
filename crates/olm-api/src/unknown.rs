//! Keeping what the types do not model.
//!
//! Two mechanisms, both aimed at one promise: parsing a manifest and serialising it again
//! neither drops nor adds anything the author wrote. One normalisation is deliberate: an
//! explicit `null` object member is dropped, because Kubernetes treats it as absent and
//! server-side apply rejects `null` for typed fields.
//!
//! * `keep_unknown_fields!` is for our own structs. The struct derives `Serialize` and
//!   `Deserialize` with `#[serde(remote = "Self")]` and has a field
//!   `extra: BTreeMap<String, serde_json::Value>` marked `#[serde(skip)]`. Keys the struct does
//!   not know land in `extra` and are written back after the known ones. This is done by
//!   hand rather than with `#[serde(flatten)]` because flatten buffers the whole struct and
//!   so loses the path of a nested error (`installModes[0].type`), which users need.
//! * [`Verbatim<T>`] wraps a type we do not own (k8s-openapi's `DeploymentSpec`,
//!   `PolicyRule`, ...). Those types drop unknown keys and normalise some values (a bare
//!   integer quantity becomes a string, a missing required list becomes `[]`). `Verbatim`
//!   remembers the original JSON when, and only when, it differs from what the typed value
//!   serialises to, and writes the original back as long as the typed value is unchanged.
//!   Once code edits the value, the typed form is written (unknown keys are then lost, as
//!   they are upstream).
//!
//! The generated CRD schemas mark every such object `x-kubernetes-preserve-unknown-fields`,
//! so what the types keep, the apiserver keeps too, and a server-side apply of a bundle's CSV
//! with extra keys (`spec.skipRange`, `spec.support`, ...) is accepted rather than rejected with
//! "field not declared in schema". Upstream's CRDs prune such keys instead.

use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

use schemars::JsonSchema;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Fields a struct does not model, in the order they were read.
pub type ExtraFields = BTreeMap<String, Value>;

/// Deserialises `map` with `typed` (a `remote = "Self"` derive) while tracking the path of
/// any error, and returns the typed value plus the keys that are not among `known_fields`.
#[doc(hidden)]
pub fn split_known<T, E>(
    map: Map<String, Value>,
    known_fields: &[&str],
    typed: impl FnOnce(serde_path_to_error::Deserializer<'_, '_, &Value>) -> Result<T, serde_json::Error>,
) -> Result<(T, ExtraFields), E>
where
    E: serde::de::Error,
{
    let object = Value::Object(map);
    let mut track = serde_path_to_error::Track::new();
    let value = match typed(serde_path_to_error::Deserializer::new(&object, &mut track)) {
        Ok(value) => value,
        Err(err) => return Err(E::custom(with_path(&track.path(), &err))),
    };
    let Value::Object(map) = object else {
        return Ok((value, ExtraFields::new()));
    };
    // An explicit `null` is the same as an absent key in Kubernetes (and server-side apply
    // rejects `null` for typed fields), so it is not kept.
    let extra = map
        .into_iter()
        .filter(|(key, value)| !value.is_null() && !known_fields.contains(&key.as_str()))
        .collect();
    Ok((value, extra))
}

/// The wire names of a struct's fields, as its derived `Deserialize` declares them.
///
/// Found by handing the derive a deserializer that records the field list it is asked for
/// and then stops; computed once per type.
#[doc(hidden)]
pub fn struct_fields<T>(deserialize: impl FnOnce(FieldProbe<'_>) -> Result<T, serde::de::value::Error>) -> &'static [&'static str] {
    let seen = std::cell::Cell::new(None);
    let _ = deserialize(FieldProbe(&seen));
    seen.get().unwrap_or_default()
}

/// See [`struct_fields`].
#[doc(hidden)]
pub struct FieldProbe<'a>(&'a std::cell::Cell<Option<&'static [&'static str]>>);

impl<'de> Deserializer<'de> for FieldProbe<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(Self::Error::custom("field probe"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.set(Some(fields));
        Err(Self::Error::custom("field probe"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
    }
}

/// Serialises the known fields with `known`, then appends the unknown ones that the known
/// fields did not set.
#[doc(hidden)]
pub fn join_known<S: Serializer>(known: Result<Value, serde_json::Error>, extra: &ExtraFields, serializer: S) -> Result<S::Ok, S::Error> {
    let mut known = known.map_err(serde::ser::Error::custom)?;
    if let Value::Object(map) = &mut known {
        for (key, value) in extra {
            if !map.contains_key(key) {
                map.insert(key.clone(), value.clone());
            }
        }
    }
    known.serialize(serializer)
}

/// `value` without object members whose value is `null` (recursively; array elements stay).
pub fn without_null_members(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, without_null_members(v))).collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_null_members).collect()),
        other => other,
    }
}

/// `path: message`, or just the message when the error is at the root.
pub(crate) fn with_path(path: &serde_path_to_error::Path, err: &dyn std::fmt::Display) -> String {
    let path = path.to_string();
    if path.is_empty() || path == "." { err.to_string() } else { format!("{path}: {err}") }
}

/// Implements `Serialize` and `Deserialize` for a struct that derives them with
/// `#[serde(remote = "Self")]` and has an `extra: ExtraFields` field marked `#[serde(skip)]`.
macro_rules! keep_unknown_fields {
    ($ty:ty) => {
        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                static FIELDS: ::std::sync::OnceLock<&'static [&'static str]> = ::std::sync::OnceLock::new();
                let fields = FIELDS.get_or_init(|| $crate::unknown::struct_fields(|probe| <$ty>::deserialize(probe)));
                let map = <::serde_json::Map<String, ::serde_json::Value> as ::serde::Deserialize>::deserialize(deserializer)?;
                let (mut value, extra) = $crate::unknown::split_known::<$ty, D::Error>(map, fields, |de| <$ty>::deserialize(de))?;
                value.extra = extra;
                Ok(value)
            }
        }

        impl ::serde::Serialize for $ty {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                $crate::unknown::join_known(<$ty>::serialize(self, ::serde_json::value::Serializer), &self.extra, serializer)
            }
        }
    };
}
pub(crate) use keep_unknown_fields;

/// A typed value that serialises back to exactly what was read, as long as it is unchanged.
/// See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Verbatim<T> {
    value: T,
    original: Option<Box<Original>>,
}

/// Kept as compact text and a digest rather than as two JSON trees: watch caches hold every
/// CSV's install strategy, and the trees cost several times their text.
#[derive(Clone, Debug)]
struct Original {
    /// What was read, as compact JSON.
    raw: Box<str>,
    /// Digest of the compact JSON the typed value serialised to right after reading.
    typed: u64,
}

/// Digest of `value`'s compact JSON (SipHash with fixed keys: stable within and across runs).
pub fn json_digest<T: Serialize>(value: &T) -> Result<u64, serde_json::Error> {
    use std::hash::{Hash, Hasher};
    let text = serde_json::to_string(value)?;
    let mut hasher = std::hash::DefaultHasher::new();
    text.hash(&mut hasher);
    Ok(hasher.finish())
}

impl<T> Verbatim<T> {
    /// Wraps a value built in code (nothing to preserve).
    pub fn new(value: T) -> Self {
        Verbatim { value, original: None }
    }

    /// The typed value.
    pub fn into_inner(self) -> T {
        self.value
    }

    /// Whether the input carried something the typed value does not reproduce (unknown keys,
    /// non-canonical values, explicit nulls).
    pub fn has_untyped_content(&self) -> bool {
        self.original.is_some()
    }
}

impl<T> From<T> for Verbatim<T> {
    fn from(value: T) -> Self {
        Verbatim::new(value)
    }
}

impl<T> Deref for Verbatim<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for Verbatim<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T: PartialEq> PartialEq for Verbatim<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<'de, T: DeserializeOwned + Serialize> Deserialize<'de> for Verbatim<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(deserializer)?;
        let mut track = serde_path_to_error::Track::new();
        let value = T::deserialize(serde_path_to_error::Deserializer::new(raw.clone(), &mut track))
            .map_err(|err| D::Error::custom(with_path(&track.path(), &err)))?;
        let typed = serde_json::to_value(&value).map_err(D::Error::custom)?;
        // Explicit nulls (`creationTimestamp: null` in operator-sdk pod templates) mean
        // "absent"; dropping them first keeps the common case free of a second copy.
        let raw = without_null_members(raw);
        let original = if typed == raw {
            None
        } else {
            Some(Box::new(Original {
                raw: raw.to_string().into_boxed_str(),
                typed: json_digest(&typed).map_err(D::Error::custom)?,
            }))
        };
        Ok(Verbatim { value, original })
    }
}

impl<T: Serialize> Serialize for Verbatim<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let Some(original) = &self.original {
            // Same digest as right after reading: the value is unchanged, write what was read.
            let now = serde_json::to_value(&self.value).map_err(serde::ser::Error::custom)?;
            if json_digest(&now).map_err(serde::ser::Error::custom)? == original.typed {
                let raw: Value = serde_json::from_str(&original.raw).map_err(serde::ser::Error::custom)?;
                return raw.serialize(serializer);
            }
        }
        self.value.serialize(serializer)
    }
}

impl<T: JsonSchema> JsonSchema for Verbatim<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn schema_id() -> std::borrow::Cow<'static, str> {
        T::schema_id()
    }

    fn inline_schema() -> bool {
        T::inline_schema()
    }

    /// `T`'s schema, plus `x-kubernetes-preserve-unknown-fields` on objects: what `Verbatim`
    /// keeps in Rust, the apiserver keeps too (and server-side apply accepts it).
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = T::json_schema(generator);
        if schema.get("type").and_then(|t| t.as_str()) == Some("object") {
            schema.insert("x-kubernetes-preserve-unknown-fields".to_owned(), true.into());
        }
        schema
    }
}

/// Implements `Serialize` and `Deserialize` for a spec struct that derives them with
/// `#[serde(remote = "Self")]`, so that a missing (or `null`) `spec` reads as the default.
///
/// Upstream marks these specs `omitempty` and real manifests omit them (OLM's own chart
/// ships `OLMConfig` without a spec), but kube-derive's root type requires `spec`. serde asks
/// a missing field's type to deserialise itself from "none", which this accepts.
macro_rules! default_when_missing {
    ($ty:ty) => {
        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Present($ty);
                impl<'de> ::serde::Deserialize<'de> for Present {
                    fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                        <$ty>::deserialize(deserializer).map(Present)
                    }
                }
                let present = <Option<Present> as ::serde::Deserialize>::deserialize(deserializer)?;
                Ok(present.map(|p| p.0).unwrap_or_default())
            }
        }

        impl ::serde::Serialize for $ty {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                <$ty>::serialize(self, serializer)
            }
        }
    };
}
pub(crate) use default_when_missing;
