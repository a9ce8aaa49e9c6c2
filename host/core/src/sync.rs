//! Locks that outlive a panic.

use std::sync::{Mutex, MutexGuard};

/// `mutex`'s guard, poisoned or not: one thread's panic must not turn every later call
/// that takes the lock into a panic too. For state that each holder leaves whole (a
/// table, a counter), which is all sandlot keeps behind a mutex.
///
/// ```
/// let shared = std::sync::Arc::new(std::sync::Mutex::new(1));
/// let poisoner = shared.clone();
/// let _ = std::thread::spawn(move || {
///     let _guard = poisoner.lock().unwrap();
///     panic!("a holder panics");
/// })
/// .join();
/// assert_eq!(*sandlot::sync::lock(&shared), 1);
/// ```
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
