//! Byte searches the masking and the proxy's rewriting share.

/// The length of the longest end of `bytes` that is the beginning of one of
/// `values` (longest first), shorter than it. `values` is walked, not collected: it
/// runs for every chunk of a stream.
pub(super) fn partial_suffix<'a>(
    bytes: &[u8],
    values: impl Iterator<Item = &'a [u8]> + Clone,
) -> usize {
    let longest = values.clone().next().map_or(0, <[u8]>::len);
    (1..longest.min(bytes.len() + 1))
        .rev()
        .find(|&n| {
            let tail = &bytes[bytes.len() - n..];
            values.clone().any(|v| v.len() > n && v.starts_with(tail))
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
