//! One FBC document of a known schema → its typed object (package, channel,
//! bundle, deprecations); what is wrong with it is an error or a problem.

use std::collections::{HashMap, HashSet};

use base64::Engine as _;
use serde_json::{Map, Value};

use super::blob::{Blob, JsonText};
use super::catalog::{Bundle, Channel, ChannelEntry, DeprecationEntry, DeprecationReference, Icon, Package, RelatedImage};
use super::json::{get_ci, is_csv, json_kind, opt_str};
use super::meta::{Meta, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE};
use super::property::{PackageProperty, Property, PropertyKind};
use crate::error::Problem;
use crate::graph::ChannelGraph;
use crate::version::{Version, VersionRange};

pub(super) fn parse_package(obj: &Map<String, Value>, meta: &Meta) -> Result<Package, String> {
    let icon = match get_ci(obj, "icon") {
        None | Some(Value::Null) => None,
        Some(Value::Object(icon)) => {
            // Whitespace anywhere (line breaks, a trailing space, as real icons have) is not
            // part of the data: dropping it is unambiguous.
            let base64data: String = opt_str(icon, "base64data")?
                .chars()
                .filter(|c| !c.is_ascii_whitespace())
                .collect();
            if base64::engine::general_purpose::STANDARD
                .decode(base64data.as_bytes())
                .is_err()
            {
                return Err(
                    "icon.base64data is not valid standard base64; re-encode the icon".into(),
                );
            }
            Some(Icon {
                base64data,
                mediatype: opt_str(icon, "mediatype")?,
            })
        }
        Some(other) => {
            return Err(format!(
                "\"icon\" must be an object, found {}",
                json_kind(other)
            ));
        }
    };
    let description = opt_str(obj, "description")?;
    Ok(Package {
        name: meta.name.clone(),
        default_channel: opt_str(obj, "defaultChannel")?,
        description: (!description.is_empty()).then_some(description),
        icon,
        deprecation: None,
        deprecations: Vec::new(),
        properties: parse_properties(obj)?,
        source: meta.source.clone(),
        channels: Vec::new(),
        channel_index: HashMap::new(),
        bundles: Vec::new(),
        bundle_index: HashMap::new(),
    })
}

fn parse_properties(obj: &Map<String, Value>) -> Result<Vec<Property>, String> {
    parse_properties_in(obj, None)
}

/// Parse `properties`; with `blob`, values are taken from the blob's bytes.
fn parse_properties_in(
    obj: &Map<String, Value>,
    blob: Option<(&Blob, &str, &[Option<(usize, usize)>])>,
) -> Result<Vec<Property>, String> {
    // Ranges only exist for the exact key "properties".
    let exact = obj.contains_key("properties");
    match get_ci(obj, "properties") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let text = match blob {
                    Some((b, text, ranges)) if exact => ranges
                        .get(i)
                        .copied()
                        .flatten()
                        .and_then(|(s, e)| JsonText::from_blob(b, text, s, e)),
                    _ => None,
                };
                Property::parse_with_text(p, text).map_err(|e| format!("properties[{i}]: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()
            // Collecting through a Result grows the Vec by doubling; the catalog keeps
            // these for its lifetime (one per bundle), so drop the unused capacity.
            .map(|mut properties| {
                properties.shrink_to_fit();
                properties
            }),
        Some(other) => Err(format!(
            "\"properties\" must be a list, found {}",
            json_kind(other)
        )),
    }
}

pub(super) fn parse_channel(
    obj: &Map<String, Value>,
    meta: &Meta,
) -> Result<(Channel, Vec<Problem>), String> {
    let src = meta.source.as_deref();
    let mut problems = Vec::new();
    if meta.name.is_empty() {
        return Err("olm.channel has no name; set \"name\"".into());
    }
    let items = match get_ci(obj, "entries") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.clone(),
        Some(other) => {
            return Err(format!(
                "\"entries\" must be a list, found {}",
                json_kind(other)
            ));
        }
    };
    let mut entries = Vec::with_capacity(items.len());
    let mut seen = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let Value::Object(e) = item else {
            return Err(format!(
                "entries[{i}] must be an object, found {}",
                json_kind(item)
            ));
        };
        let name = opt_str(e, "name").map_err(|m| format!("entries[{i}]: {m}"))?;
        if name.is_empty() {
            problems.push(
                Problem::new(format!("entries[{i}] has no name"))
                    .file(src)
                    .package(&meta.package)
                    .channel(&meta.name)
                    .fix("set the entry's \"name\" to a bundle name"),
            );
            continue;
        }
        let replaces = opt_str(e, "replaces").map_err(|m| format!("entry {name:?}: {m}"))?;
        let skips = match get_ci(e, "skips") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(s)) => {
                let mut out = Vec::with_capacity(s.len());
                for (j, v) in s.iter().enumerate() {
                    match v {
                        Value::String(x) if !x.is_empty() => out.push(x.clone()),
                        Value::String(_) => problems.push(
                            Problem::new(format!("skips[{j}] of entry is empty"))
                                .file(src)
                                .package(&meta.package)
                                .channel(&meta.name)
                                .bundle(&name)
                                .fix("remove the empty skip"),
                        ),
                        other => {
                            return Err(format!(
                                "entry {name:?}: skips[{j}] must be a string, found {}",
                                json_kind(other)
                            ));
                        }
                    }
                }
                out
            }
            Some(other) => {
                return Err(format!(
                    "entry {name:?}: \"skips\" must be a list, found {}",
                    json_kind(other)
                ));
            }
        };
        let skip_range = opt_str(e, "skipRange").map_err(|m| format!("entry {name:?}: {m}"))?;
        let skip_range_parsed = if skip_range.is_empty() {
            None
        } else {
            match VersionRange::parse(&skip_range) {
                Ok(r) => Some(r),
                Err(err) => {
                    problems.push(
                        // Upstream's resolver and graph tools ignore a range that does not
                        // parse: the entry is served with its replaces and skips, as if it
                        // had no skipRange, and said so.
                        Problem::new(format!("skipRange {skip_range:?} does not parse ({err}); it is ignored: this bundle upgrades only from the bundles its replaces and skips name"))
                            .code("InvalidSkipRange")
                            .file(src)
                            .package(&meta.package)
                            .channel(&meta.name)
                            .bundle(&name)
                            .fix("write a blang/semver range such as \">=1.0.0 <1.2.0\" (numbers only: no leading v)")
                            .warning(),
                    );
                    None
                }
            }
        };
        if seen.contains(&name) {
            problems.push(
                Problem::new("duplicate entry in channel")
                    .code("DuplicateEntry")
                    .file(src)
                    .package(&meta.package)
                    .channel(&meta.name)
                    .bundle(&name)
                    .fix("keep one entry per bundle name"),
            );
            continue;
        }
        seen.insert(name.clone());
        entries.push(ChannelEntry {
            name,
            replaces: (!replaces.is_empty()).then_some(replaces),
            skips,
            skip_range: (!skip_range.is_empty()).then_some(skip_range),
            skip_range_parsed,
        });
    }
    let channel = Channel {
        name: meta.name.clone(),
        package: meta.package.clone(),
        deprecation: None,
        properties: parse_properties(obj)?,
        source: meta.source.clone(),
        entries,
        graph: ChannelGraph::default(),
    };
    Ok((channel, problems))
}

pub(super) fn parse_bundle(
    obj: &Map<String, Value>,
    meta: &Meta,
    text: &str,
    ranges: &[Option<(usize, usize)>],
) -> Result<Bundle, String> {
    if meta.name.is_empty() {
        return Err(
            "olm.bundle has no name; set \"name\" (conventionally the CSV name)".into(),
        );
    }
    if meta.package.is_empty() {
        return Err("olm.bundle has no package; set \"package\"".into());
    }
    let image = opt_str(obj, "image")?;
    if let Some(err) = image_ref_error(&image) {
        return Err(format!(
            "image {image:?} is not a valid image reference: {err}"
        ));
    }
    let properties = parse_properties_in(obj, Some((&meta.blob, text, ranges)))?;
    let pkg_props: Vec<&PackageProperty> = properties
        .iter()
        .filter_map(|p| match &p.kind {
            PropertyKind::Package(pp) => Some(pp),
            _ => None,
        })
        .collect();
    let pp = match pkg_props.as_slice() {
        [one] => *one,
        [] => return Err("bundle has no olm.package property; add {type: olm.package, value: {packageName, version}}".into()),
        _ => return Err(format!("bundle has {} olm.package properties; keep exactly one", pkg_props.len())),
    };
    if pp.package_name != meta.package {
        return Err(format!(
            "olm.package property says packageName {:?} but the bundle's package is {:?}; make them equal",
            pp.package_name, meta.package
        ));
    }
    let version = Version::parse(&pp.version)
        .map_err(|e| format!("olm.package version {:?} is not valid semver ({e}); use MAJOR.MINOR.PATCH[-pre][+build] without a leading 'v'", pp.version))?;
    if let Some(release) = &pp.release {
        if !version.build.is_empty() {
            return Err("version has build metadata and a release is set; drop one".into());
        }
        if release.len() > 20 || semver::Prerelease::new(release).is_err() {
            return Err(format!(
                "release {release:?} must be dot-separated alphanumerics/hyphens, at most 20 characters"
            ));
        }
        let expected = format!("{}-v{}-{}", meta.package, pp.version, release);
        if meta.name != expected {
            return Err(format!(
                "a bundle with a release must be named {expected:?}"
            ));
        }
    }
    let related_images = match get_ci(obj, "relatedImages") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let Value::Object(ri) = item else {
                    return Err(format!("relatedImages[{i}] must be an object"));
                };
                let image = opt_str(ri, "image")?;
                if let Some(err) = image_ref_error(&image) {
                    return Err(format!(
                        "relatedImages[{i}].image {image:?} is not a valid image reference: {err}"
                    ));
                }
                out.push(RelatedImage {
                    name: opt_str(ri, "name")?,
                    image,
                });
            }
            out
        }
        Some(other) => {
            return Err(format!(
                "\"relatedImages\" must be a list, found {}",
                json_kind(other)
            ));
        }
    };
    // Each object is decoded here only to refuse a bundle whose objects do not decode; the
    // bundle keeps them as the text it was read from (`Bundle::objects` decodes on demand):
    // parsed, the community catalog's CRDs took gigabytes. Read from the document as parsed
    // (`properties` holds one Property per item), not through `Property::value`, which
    // decompresses the bundle's whole text once per object.
    let raw_properties = match get_ci(obj, "properties") {
        Some(Value::Array(items)) => items.as_slice(),
        _ => &[],
    };
    let mut csv_property = None;
    let mut install_modes = None;
    for (i, (p, raw)) in properties.iter().zip(raw_properties).enumerate() {
        let value = raw.as_object().and_then(|m| get_ci(m, "value"));
        match p.kind {
            PropertyKind::BundleObject => {
                let data = value.and_then(|v| v.get("data")).and_then(Value::as_str).unwrap_or_default();
                let docs = crate::text::bundle_object_docs(data)?;
                if csv_property.is_none()
                    && let Some(csv) = docs.iter().find(|doc| is_csv(doc))
                {
                    csv_property = Some(i);
                    // Read now, while the CSV is decoded: the resolver asks for every bundle.
                    install_modes = Some(supported_install_modes(csv.pointer("/spec/installModes")));
                }
            }
            PropertyKind::CsvMetadata if install_modes.is_none() => {
                install_modes = Some(supported_install_modes(value.and_then(|v| v.get("installModes"))));
            }
            _ => {}
        }
    }
    // The inlined CSV, when there is one, decides (even over an olm.csv.metadata before it).
    let install_modes = install_modes.flatten();
    Ok(Bundle {
        name: meta.name.clone(),
        package: meta.package.clone(),
        image,
        version,
        release: pp.release.clone(),
        properties,
        related_images,
        channels: Vec::new(),
        deprecation: None,
        source: meta.source.clone(),
        csv_property,
        install_modes,
    })
}

/// The `type` of every entry of a CSV's `installModes` with `supported: true`; `None` when
/// `modes` is not a list.
pub fn supported_install_modes(modes: Option<&Value>) -> Option<Vec<String>> {
    let supported = modes?
        .as_array()?
        .iter()
        .filter(|mode| mode.get("supported").and_then(Value::as_bool) == Some(true))
        .filter_map(|mode| Some(mode.get("type")?.as_str()?.to_owned()))
        .collect();
    Some(supported)
}

pub(super) fn parse_deprecations(obj: &Map<String, Value>) -> Result<Vec<DeprecationEntry>, String> {
    let items = match get_ci(obj, "entries") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(format!(
                "\"entries\" must be a list, found {}",
                json_kind(other)
            ));
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(e) = item else {
            return Err(format!("entries[{i}] must be an object"));
        };
        let Some(Value::Object(r)) = get_ci(e, "reference") else {
            return Err(format!("entries[{i}] has no \"reference\" object"));
        };
        let schema = opt_str(r, "schema")?;
        let name = opt_str(r, "name")?;
        let reference = match schema.as_str() {
            SCHEMA_PACKAGE if name.is_empty() => DeprecationReference::Package,
            SCHEMA_PACKAGE => {
                return Err(format!(
                    "entries[{i}]: a package reference must not set a name (the package is implied)"
                ));
            }
            SCHEMA_CHANNEL | SCHEMA_BUNDLE if name.is_empty() => {
                return Err(format!("entries[{i}]: reference.name must be set"));
            }
            SCHEMA_CHANNEL => DeprecationReference::Channel(name),
            SCHEMA_BUNDLE => DeprecationReference::Bundle(name),
            "" => return Err(format!("entries[{i}]: reference.schema must be set")),
            other => {
                return Err(format!(
                    "entries[{i}]: reference.schema {other:?} is not olm.package, olm.channel or olm.bundle"
                ));
            }
        };
        let message = opt_str(e, "message")?;
        if message.is_empty() {
            return Err(format!("entries[{i}]: message must not be empty"));
        }
        out.push(DeprecationEntry { reference, message });
    }
    Ok(out)
}

pub(super) fn dns1123_label_error(name: &str) -> Option<String> {
    if name.len() > 63 {
        return Some(format!("{} characters, at most 63 allowed", name.len()));
    }
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ok_ends = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .last()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    if ok_chars && ok_ends {
        None
    } else {
        Some(format!(
            "{name:?} must consist of lowercase alphanumerics or '-' and start and end with an alphanumeric"
        ))
    }
}

/// A light docker-reference check: what opm's parser would certainly reject.
fn image_ref_error(image: &str) -> Option<&'static str> {
    if image.is_empty() {
        return None;
    }
    if image.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("it contains whitespace");
    }
    let (name, _digest) = image.split_once('@').unwrap_or((image, ""));
    if name.is_empty() {
        return Some("the repository name is empty");
    }
    // The repository path (everything after the host) must be lowercase.
    let path = match name.split_once('/') {
        Some((host, rest)) if host.contains(['.', ':']) || host == "localhost" => rest,
        _ => name,
    };
    let repo = path
        .rsplit_once(':')
        .map_or(path, |(r, tag)| if tag.contains('/') { path } else { r });
    if repo.chars().any(|c| c.is_ascii_uppercase()) {
        return Some("repository names must be lowercase");
    }
    None
}
