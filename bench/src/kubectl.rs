//! kubectl on an olm-dev control plane, its error naming the command: what the end-to-end run,
//! the host speed probe and the unpack comparison send to their private control plane.

pub(crate) fn kubectl(layout: &olm_dev::Layout, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
    olm_dev::kubectl(layout, args, stdin).map_err(|e| anyhow::anyhow!("kubectl {}: {e}", args.join(" ")))
}
