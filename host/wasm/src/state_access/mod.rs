//! State access: exports added to a runtime component so that the host can read and
//! write the interpreter's state (its linear memory and its mutable globals), which
//! the component model otherwise keeps from the host. sandlot adds them to the
//! runtimes it builds (the JavaScript one) when it installs them; with them, a
//! component's session is snapshotted as exactly as a module runtime's.
//!
//! What is added, to the component that instantiates the interpreter's core modules
//! (the top-level one, or in a composition the nested one whose instance exports
//! `sandlot:plugin/interpreter`):
//!
//! - each core module that defines a memory or a mutable global exports them;
//! - an accessor module, instantiated over those exports, whose functions are lifted
//!   and exported (and re-exported by the composition) as the functions [`NAMES`]
//!   lists.
//!
//! ```text
//! sandlot-state-size:       func() -> u32                  memory.size, in wasm pages
//! sandlot-state-grow:       func(pages: u32) -> s32        memory.grow
//! sandlot-state-read:       func(offset: u32, len: u32, scratch: u32) -> list<u8>
//! sandlot-state-place:      func(offset: u32)              where the next write lands
//! sandlot-state-write:      func(offset: u32, bytes: list<u8>)
//! sandlot-state-globals:    func() -> u32
//! sandlot-state-global-get: func(index: u32) -> u64
//! sandlot-state-global-set: func(index: u32, value: u64)
//! ```
//!
//! Neither direction costs a copy inside the guest. `read` returns the memory range
//! itself: the list's pointer and length are written at `scratch` for the call and
//! its post-return puts back the eight bytes that were there, so the host's view of
//! the list is the memory as it was. `write` lands where `place` said: the accessor's
//! `realloc` hands the canonical ABI that offset, so the bytes are copied straight
//! into place.
//!
//! A component whose state is more than its memory and globals is refused: one with
//! more than one memory, or whose code can change a table (`table.set`, `table.grow`
//! and the like), since tables are not captured.

mod accessor;
mod add;
mod binary;
mod core_module;
mod instrument;
mod names;

pub(crate) use add::add;
pub(crate) use names::{State, NAMES};

#[cfg(test)]
mod tests;
