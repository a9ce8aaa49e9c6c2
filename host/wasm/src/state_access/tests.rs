//! State access's tests: components built by hand, given state access, and read
//! and written through the added exports under wasmtime.

use super::accessor::body;
use super::add::add;
use super::names::NAMES;
use wasm_encoder::{
    CodeSection, Component, ConstExpr, FunctionSection, GlobalSection, GlobalType, InstanceSection,
    MemoryType, Module, ModuleArg, ModuleSection, TableSection, TableType, TypeSection, ValType,
};
use wasmtime::component::{Component as Compiled, Linker, WasmList};
use wasmtime::{Engine, Store};

/// A component of one module per entry of `modules`, each instantiated: a module
/// with a memory of one page and globals `i32 7` and `i64 9` (mutable) and `i32 1`
/// (not); with `table_code`, a function that grows a table too.
fn sample(modules: usize, table_code: bool) -> Vec<u8> {
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], []);
    module.section(&types);
    let mut functions = FunctionSection::new();
    if table_code {
        functions.function(0);
        module.section(&functions);
        let mut tables = TableSection::new();
        tables.table(TableType {
            element_type: wasm_encoder::RefType::FUNCREF,
            minimum: 1,
            maximum: None,
            table64: false,
            shared: false,
        });
        module.section(&tables);
    }
    let mut memories = wasm_encoder::MemorySection::new();
    memories.memory(MemoryType {
        minimum: 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    module.section(&memories);
    let mut globals = GlobalSection::new();
    let ty = |val_type, mutable| GlobalType {
        val_type,
        mutable,
        shared: false,
    };
    globals.global(ty(ValType::I32, true), &ConstExpr::i32_const(7));
    globals.global(ty(ValType::I64, true), &ConstExpr::i64_const(9));
    globals.global(ty(ValType::I32, false), &ConstExpr::i32_const(1));
    module.section(&globals);
    if table_code {
        let mut code = CodeSection::new();
        let mut f = body();
        f.instructions()
            .ref_null(wasm_encoder::HeapType::FUNC)
            .i32_const(1)
            .table_grow(0)
            .drop()
            .end();
        code.function(&f);
        module.section(&code);
    }
    let mut component = Component::new();
    for _ in 0..modules {
        component.section(&ModuleSection(&module));
    }
    let mut instances = InstanceSection::new();
    for index in 0..modules {
        instances.instantiate(index as u32, Vec::<(&str, ModuleArg)>::new());
    }
    component.section(&instances);
    component.finish()
}

#[test]
fn memory_and_globals_round_trip_through_the_added_exports() {
    let bytes = add(&sample(1, false)).unwrap();
    let engine = Engine::default();
    let compiled = Compiled::new(&engine, &bytes).unwrap();
    let mut store = Store::new(&engine, ());
    let instance = Linker::new(&engine)
        .instantiate(&mut store, &compiled)
        .unwrap();
    macro_rules! func {
        ($name:expr, $params:ty, $results:ty) => {
            instance
                .get_typed_func::<$params, $results>(&mut store, $name)
                .unwrap()
        };
    }
    let size = func!(NAMES.size, (), (u32,));
    assert_eq!(size.call(&mut store, ()).unwrap(), (1,));
    func!(NAMES.place, (u32,), ())
        .call(&mut store, (100,))
        .unwrap();
    func!(NAMES.write, (u32, &[u8]), ())
        .call(&mut store, (100, &[1, 2, 3][..]))
        .unwrap();
    let (memory,) = func!(NAMES.read, (u32, u32, u32), (WasmList<u8>,))
        .call(&mut store, (0, 65536, 0))
        .unwrap();
    let memory = memory.as_le_slice(&store);
    assert_eq!(memory.len(), 65536);
    assert_eq!(&memory[100..103], [1, 2, 3]);
    // The answer's scratch space is put back as it was.
    assert_eq!(&memory[..8], [0; 8]);
    let grow = func!(NAMES.grow, (u32,), (i32,));
    assert_eq!(grow.call(&mut store, (2,)).unwrap(), (1,));
    assert_eq!(size.call(&mut store, ()).unwrap(), (3,));
    let count = func!(NAMES.globals, (), (u32,));
    assert_eq!(
        count.call(&mut store, ()).unwrap(),
        (2,),
        "the mutable ones"
    );
    let get = func!(NAMES.global_get, (u32,), (u64,));
    let set = func!(NAMES.global_set, (u32, u64), ());
    assert_eq!(get.call(&mut store, (0,)).unwrap(), (7,));
    assert_eq!(get.call(&mut store, (1,)).unwrap(), (9,));
    set.call(&mut store, (0, 42)).unwrap();
    set.call(&mut store, (1, u64::MAX)).unwrap();
    assert_eq!(get.call(&mut store, (0,)).unwrap(), (42,));
    assert_eq!(get.call(&mut store, (1,)).unwrap(), (u64::MAX,));
    // A global past the last traps rather than touch anything.
    assert!(get.call(&mut store, (2,)).is_err());
}

#[test]
fn state_it_could_not_carry_is_refused() {
    let two = add(&sample(2, false)).unwrap_err();
    assert!(two.contains("more than one memory"), "{two}");
    let table = add(&sample(1, true)).unwrap_err();
    assert!(table.contains("change a table"), "{table}");
    assert!(add(b"not wasm").unwrap_err().contains("not WebAssembly"));
}
