//! The names a component with state access exports, and the one-per-function shape
//! they come in: the contract with the host's reader, apart from how it is built.

/// The exports a component with state access has, in the order the accessor lifts
/// them.
pub(crate) const NAMES: State<&str> = State {
    size: "sandlot-state-size",
    grow: "sandlot-state-grow",
    read: "sandlot-state-read",
    place: "sandlot-state-place",
    write: "sandlot-state-write",
    globals: "sandlot-state-globals",
    global_get: "sandlot-state-global-get",
    global_set: "sandlot-state-global-set",
};

/// One of something per state-access function.
#[derive(Debug, Clone, Copy)]
pub(crate) struct State<T> {
    pub size: T,
    pub grow: T,
    pub read: T,
    pub place: T,
    pub write: T,
    pub globals: T,
    pub global_get: T,
    pub global_set: T,
}

impl<T: Copy> State<T> {
    pub(super) fn all(&self) -> [T; 8] {
        [
            self.size,
            self.grow,
            self.read,
            self.place,
            self.write,
            self.globals,
            self.global_get,
            self.global_set,
        ]
    }
}
