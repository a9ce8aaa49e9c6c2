//! Byte searches the masking and the proxy's rewriting share.

/// The length of the longest end of `bytes` that is the beginning of one of
/// `values` (longest first), shorter than it.
pub(super) fn partial_suffix(bytes: &[u8], values: &[&[u8]]) -> usize {
    let longest = values.first().map_or(0, |v| v.len());
    (1..longest.min(bytes.len() + 1))
        .rev()
        .find(|&n| {
            let tail = &bytes[bytes.len() - n..];
            values.iter().any(|v| v.len() > n && v.starts_with(tail))
        })
        .unwrap_or(0)
}

/// `bytes` with every `from` replaced by `to`.
pub(crate) fn replace_all(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(at) = memchr::memmem::find(rest, from) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(to);
        rest = &rest[at + from.len()..];
    }
    out.extend_from_slice(rest);
    out
}
