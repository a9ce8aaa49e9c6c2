//! The limits every call into a handler runs under, and how they grow with the code
//! handed over: a public knob of its own, set once on the plugin host.

use std::time::Duration;

/// Limits applied to every call into a language handler.
///
/// Handlers are pure functions that should answer in microseconds; these limits only
/// stop a broken or hostile plugin from hanging or exhausting the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerLimits {
    /// Most linear memory one call may use.
    pub memory: usize,
    /// Wall-clock deadline of one call.
    pub timeout: Duration,
}

impl Default for HandlerLimits {
    fn default() -> Self {
        HandlerLimits {
            memory: 64 << 20,
            timeout: Duration::from_secs(1),
        }
    }
}

/// Linear memory a call may use beyond [`HandlerLimits::memory`] per byte of code it
/// is handed: a scanner keeps a token per few bytes, so a 2 MB file of `x=1` lines
/// needs more than the fixed 64 MiB.
const MEMORY_PER_CODE_BYTE: usize = 64;

/// Time a call may take beyond [`HandlerLimits::timeout`] per MiB of code it is
/// handed. The built-in handlers analyse a MiB of literal-heavy code in about a fifth
/// of this on a slow machine (the `plugins` bench).
const TIME_PER_CODE_MIB: Duration = Duration::from_secs(1);

impl HandlerLimits {
    /// The limits of a call handed `code_bytes` of code: these, plus memory and time in
    /// proportion to the code, so that a long program (a model's inlined table, say) is
    /// analysed rather than refused, while a handler that loops or leaks on a short one
    /// still stops at the fixed budget.
    ///
    /// ```
    /// use sandlot::HandlerLimits;
    /// use std::time::Duration;
    /// let limits = HandlerLimits::default();
    /// assert_eq!(limits.for_code(0), limits);
    /// let ten_mib = limits.for_code(10 << 20);
    /// assert_eq!(ten_mib.timeout, limits.timeout + Duration::from_secs(10));
    /// assert_eq!(ten_mib.memory, limits.memory + (640 << 20));
    /// ```
    pub fn for_code(self, code_bytes: usize) -> HandlerLimits {
        let mib = code_bytes as f64 / f64::from(1u32 << 20);
        HandlerLimits {
            memory: self
                .memory
                .saturating_add(code_bytes.saturating_mul(MEMORY_PER_CODE_BYTE)),
            timeout: self.timeout + TIME_PER_CODE_MIB.mul_f64(mib),
        }
    }
}
