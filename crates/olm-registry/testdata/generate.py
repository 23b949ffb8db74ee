#!/usr/bin/env python3
"""Regenerates testdata/catalog/etcd/catalog.json from the real community-operators etcd
bundles (shared/real-catalogs/community-operators/etcd), the way `opm render` does for
bundle directories: one olm.bundle per bundle with olm.package, olm.gvk (every CRD
version) and one olm.bundle.object per manifest; channels from the bundle annotations
and the CSV `replaces`. The output is committed; this script documents how it was made."""
import base64, json, os, sys, yaml

src = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/real-catalogs/community-operators/etcd"
out = os.path.join(os.path.dirname(__file__), "catalog", "etcd", "catalog.json")

class Loader(yaml.SafeLoader):
    """YAML 1.1 without timestamps, as Go's sigs.k8s.io/yaml reads untyped values."""
Loader.yaml_implicit_resolvers = {k: [r for r in v if r[0] != "tag:yaml.org,2002:timestamp"]
                                  for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
def load(path):
    return yaml.load(open(path), Loader=Loader)

bundles, channels, icon = [], {}, None
for version in sorted(os.listdir(src)):
    bdir = os.path.join(src, version)
    if not os.path.isdir(os.path.join(bdir, "manifests")):
        continue
    ann = load(os.path.join(bdir, "metadata", "annotations.yaml"))["annotations"]
    objs = [load(os.path.join(bdir, "manifests", f)) for f in sorted(os.listdir(os.path.join(bdir, "manifests")))]
    csv = next(o for o in objs if o["kind"] == "ClusterServiceVersion")
    props = [{"type": "olm.package", "value": {"packageName": "etcd", "version": csv["spec"]["version"]}}]
    for o in objs:
        if o["kind"] == "CustomResourceDefinition":
            spec = o["spec"]
            versions = [v["name"] for v in spec.get("versions", [])] or [spec["version"]]
            for v in versions:
                props.append({"type": "olm.gvk", "value": {"group": spec["group"], "kind": spec["names"]["kind"], "version": v}})
    props.sort(key=lambda p: (p["type"], json.dumps(p["value"], sort_keys=True)))
    for o in objs:
        props.append({"type": "olm.bundle.object", "value": {"data": base64.b64encode(json.dumps(o, sort_keys=True).encode()).decode()}})
    name = csv["metadata"]["name"]
    image = "quay.io/operatorhubio/etcd:v" + csv["spec"]["version"]
    bundles.append({"schema": "olm.bundle", "name": name, "package": "etcd", "image": image, "properties": props,
                    "relatedImages": [{"name": "", "image": image}]})
    if csv["spec"].get("icon"):
        icon = csv["spec"]["icon"][0]
    for ch in ann["operators.operatorframework.io.bundle.channels.v1"].split(","):
        entry = {"name": name}
        if csv["spec"].get("replaces"):
            entry["replaces"] = csv["spec"]["replaces"]
        channels.setdefault(ch, []).append(entry)

docs = [{"schema": "olm.package", "name": "etcd", "defaultChannel": "singlenamespace-alpha",
         "icon": {"base64data": icon["base64data"], "mediatype": icon["mediatype"]}}]
for ch in sorted(channels):
    docs.append({"schema": "olm.channel", "package": "etcd", "name": ch, "entries": channels[ch]})
docs.extend(bundles)
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as f:
    for d in docs:
        f.write(json.dumps(d, indent=2) + "\n")
print(out)
