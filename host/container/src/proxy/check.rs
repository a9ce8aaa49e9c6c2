//! What `doctor` says of a backend's bound secrets: put in by an egress proxy of its
//! sandboxes, or, where they have none, left as placeholders.

use sandlot_core::backend::Check;

/// The check of a backend whose sandboxes under an allow-list have an egress proxy,
/// or, with why they have none, of one whose do not.
pub fn bound_secrets(no_proxy: Option<&str>) -> Check {
    match no_proxy {
        None => Check::ok(
            "bound secrets",
            "put in by each sandbox's egress proxy, under an allow-list, over HTTP and \
             HTTPS (HTTP/1.1, the proxy's own CA trusted in the sandbox alone)",
        ),
        Some(why) => Check::gap(
            "bound secrets",
            format!("stay placeholders: {why}"),
            "bind secrets on a backend with an egress proxy (Docker or Podman on this \
             machine, native), or give them as masked variables",
        ),
    }
}
