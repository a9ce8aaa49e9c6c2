//! The one wasmtime [`Engine`] of the process, the clock behind call deadlines, and
//! the on-disk cache of what it compiles. Language handlers (`plugin`) and runtimes
//! (`backend::wasm`) both build on it; it knows neither.

pub mod cache;

use std::sync::OnceLock;
use std::time::Duration;
use wasmtime::{Config, Engine};

/// How often the engine's epoch advances. Deadlines are counted in these ticks, so a
/// call overruns its deadline by at most one tick.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// Bumped whenever `config` changes in a way that makes compiled artifacts
/// incompatible; part of the cache key together with wasmtime's own compatibility hash,
/// so a stale artifact is never loaded.
pub const ENGINE_CONFIG_VERSION: &str = "sandlot-engine-3";

/// The process-wide engine: compiled code and type information are shared between all
/// sessions' runtimes. The first call starts the epoch thread.
pub fn shared() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        ticking(Engine::new(&config()).expect("sandlot's engine configuration is valid"))
    })
}

/// The engine of language handlers: the same settings, with wasmtime's pooling
/// allocator. A handler gets a fresh instance for every call (two or three a run),
/// and an instance in a pooled slot reuses the slot's mapping of its memory image
/// instead of mapping and unmapping its memory each time: a call costs about half, and
/// threads making calls at once no longer queue for the process's address space.
/// Runtimes stay on [`shared`]: a restore maps a snapshot's pages over an instance's
/// memory, which a reused slot would hand to the next instance.
pub fn plugins() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut pooled = config();
        let mut pool = wasmtime::PoolingAllocationConfig::new();
        // Slots are address space until used; a handler's memory is held to its own
        // cap (`MemoryCap`), so a slot takes the most a 32-bit memory can be.
        pool.total_component_instances(PLUGIN_SLOTS)
            .total_core_instances(PLUGIN_SLOTS * 4)
            .total_memories(PLUGIN_SLOTS * 2)
            .total_tables(PLUGIN_SLOTS * 2)
            .max_memory_size(1 << 32)
            .table_elements(1 << 20)
            .max_core_instance_size(16 << 20)
            .max_component_instance_size(16 << 20)
            .max_core_instances_per_component(64)
            .max_memories_per_component(16)
            .max_tables_per_component(16)
            .max_memories_per_module(4)
            .max_tables_per_module(4);
        pooled.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        // The pool reserves its slots' address space up front (about 4 TiB, none of it
        // memory): where a limit on address space refuses that, handlers get the
        // allocator runtimes use, as before, rather than no engine at all.
        let engine = Engine::new(&pooled).or_else(|_| Engine::new(&config()));
        ticking(engine.expect("sandlot's engine configuration is valid"))
    })
}

/// How many handler instances may live at once: one per call under way.
const PLUGIN_SLOTS: u32 = 1000;

/// `engine`, with a thread that advances its epoch.
fn ticking(engine: Engine) -> Engine {
    let ticker = engine.clone();
    std::thread::Builder::new()
        .name("sandlot-epoch".into())
        .spawn(move || loop {
            std::thread::sleep(EPOCH_TICK);
            ticker.increment_epoch();
        })
        .expect("cannot start the epoch thread");
    engine
}

fn config() -> Config {
    let mut config = Config::new();
    config.wasm_component_model(true);
    // Every call gets a deadline; without epochs a looping plugin would hang the host.
    config.epoch_interruption(true);
    config.parallel_compilation(true);
    config.cranelift_opt_level(wasmtime::OptLevel::Speed);
    // CPython for WASI is built with the exception-handling proposal.
    config.wasm_exceptions(true);
    // Interpreters recurse deeply (QuickJS has no stack check of its own and traps
    // at the wasm stack limit). Calls run on threads with at least 2 MiB of stack.
    config.max_wasm_stack(1 << 20);
    config
}

/// A store's memory cap: growth past `limit` traps, and `hit` records that it did, so
/// the caller can report a memory limit rather than a crash.
pub struct MemoryCap {
    pub limit: usize,
    pub hit: bool,
}

impl MemoryCap {
    pub fn new(limit: usize) -> Self {
        MemoryCap { limit, hit: false }
    }
}

impl wasmtime::ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.hit = true;
            // Failing the grow would let the guest's allocator report an out-of-memory
            // error and carry on in a state it may not recover from; trapping stops it
            // at once.
            return Err(wasmtime::Error::msg("memory limit reached"));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// The number of epoch ticks that covers `limit`, rounded up, at least one.
pub fn ticks(limit: Duration) -> u64 {
    let tick = EPOCH_TICK.as_nanos();
    (limit.as_nanos().div_ceil(tick) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up_to_whole_ticks() {
        assert_eq!(ticks(Duration::ZERO), 1);
        assert_eq!(ticks(EPOCH_TICK), 1);
        assert_eq!(ticks(EPOCH_TICK + Duration::from_nanos(1)), 2);
        assert_eq!(ticks(Duration::from_secs(1)), 200);
    }
}
