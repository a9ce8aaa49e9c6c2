//! The language handlers embedded in the binary, built by `guests/build.sh`.

macro_rules! builtins {
    ($($name:literal),* $(,)?) => {
        /// `(name, component bytes)` of every built-in language handler.
        pub(crate) const HANDLERS: &[(&str, &[u8])] = &[$(
            ($name, include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"), "/builtin/", $name, ".wasm"
            ))),
        )*];
    };
}

builtins!(
    "python",
    "javascript",
    "typescript",
    "java",
    "cpp",
    "go",
    "r",
    "ruby",
    "bash"
);
