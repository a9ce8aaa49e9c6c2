//! The accessor: the small core module, written here instruction by instruction,
//! whose functions read and write the interpreter's memory and globals for the host.

use wasm_encoder::{
    CodeSection, ConstExpr, EntityType, ExportKind, ExportSection, Function, FunctionSection,
    GlobalSection, GlobalType, ImportSection, MemArg, MemoryType, Module, TypeSection, ValType,
};

/// The accessor module's functions, in the order it defines them.
pub(super) const ACCESSOR_FUNCS: [&str; 10] = [
    "size",
    "grow",
    "read",
    "read_post",
    "place",
    "realloc",
    "write",
    "globals",
    "global_get",
    "global_set",
];

pub(super) fn body() -> Function {
    Function::new(Vec::<(u32, ValType)>::new())
}

/// A function that does `each` for the global its first parameter names, and traps
/// for any other index.
fn dispatch(
    globals: &[ValType],
    each: impl Fn(&mut wasm_encoder::InstructionSink<'_>, u32, ValType),
) -> Function {
    let mut f = body();
    {
        let mut sink = f.instructions();
        for (i, ty) in globals.iter().enumerate() {
            sink.local_get(0)
                .i32_const(i as i32)
                .i32_eq()
                .if_(wasm_encoder::BlockType::Empty);
            each(&mut sink, i as u32, *ty);
            sink.return_().end();
        }
        sink.unreachable().end();
    }
    f
}

/// The accessor: imports `state.memory` and `state.global-N`, and reads and writes
/// them for the lifted functions.
pub(super) fn accessor(globals: &[ValType]) -> Module {
    use ValType::{I32, I64};
    let mut types = TypeSection::new();
    types.ty().function([], [I32]); // 0: size, globals
    types.ty().function([I32], [I32]); // 1: grow
    types.ty().function([I32, I32, I32], [I32]); // 2: read
    types.ty().function([I32], []); // 3: read_post, place
    types.ty().function([I32, I32, I32, I32], [I32]); // 4: realloc
    types.ty().function([I32, I32, I32], []); // 5: write
    types.ty().function([I32], [I64]); // 6: global_get
    types.ty().function([I32, I64], []); // 7: global_set

    let mut imports = ImportSection::new();
    imports.import(
        "state",
        "memory",
        EntityType::Memory(MemoryType {
            minimum: 0,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        }),
    );
    for (i, ty) in globals.iter().enumerate() {
        imports.import(
            "state",
            &format!("global-{i}"),
            EntityType::Global(GlobalType {
                val_type: *ty,
                mutable: true,
                shared: false,
            }),
        );
    }
    // Its own: where the next write lands; where `read` put its answer, and what was
    // there before.
    let n = globals.len() as u32;
    let (place_at, answer_at, saved) = (n, n + 1, n + 2);
    let mut own = GlobalSection::new();
    let mutable = |val_type| GlobalType {
        val_type,
        mutable: true,
        shared: false,
    };
    own.global(mutable(I32), &ConstExpr::i32_const(0));
    own.global(mutable(I32), &ConstExpr::i32_const(0));
    own.global(mutable(I64), &ConstExpr::i64_const(0));

    let mut functions = FunctionSection::new();
    for ty in [0, 1, 2, 3, 3, 4, 5, 0, 6, 7] {
        functions.function(ty);
    }
    let mut exports = ExportSection::new();
    for (i, name) in ACCESSOR_FUNCS.iter().enumerate() {
        exports.export(name, ExportKind::Func, i as u32);
    }

    let word = |offset| MemArg {
        offset,
        align: 2,
        memory_index: 0,
    };
    let double = MemArg {
        offset: 0,
        align: 3,
        memory_index: 0,
    };
    let mut code = CodeSection::new();
    // size
    let mut f = body();
    f.instructions().memory_size(0).end();
    code.function(&f);
    // grow
    let mut f = body();
    f.instructions().local_get(0).memory_grow(0).end();
    code.function(&f);
    // read(offset, len, scratch): the pair at `scratch`, what was there kept.
    let mut f = body();
    f.instructions()
        .local_get(2)
        .global_set(answer_at)
        .local_get(2)
        .i64_load(double)
        .global_set(saved)
        .local_get(2)
        .local_get(0)
        .i32_store(word(0))
        .local_get(2)
        .local_get(1)
        .i32_store(word(4))
        .local_get(2)
        .end();
    code.function(&f);
    // read_post(answer): puts the eight bytes back.
    let mut f = body();
    f.instructions()
        .global_get(answer_at)
        .global_get(saved)
        .i64_store(double)
        .end();
    code.function(&f);
    // place(offset)
    let mut f = body();
    f.instructions().local_get(0).global_set(place_at).end();
    code.function(&f);
    // realloc(old, old_len, align, len): the place.
    let mut f = body();
    f.instructions().global_get(place_at).end();
    code.function(&f);
    // write(offset, ptr, len): the bytes are already there; a write that landed
    // elsewhere traps.
    let mut f = body();
    f.instructions()
        .local_get(0)
        .local_get(1)
        .i32_ne()
        .if_(wasm_encoder::BlockType::Empty)
        .unreachable()
        .end()
        .end();
    code.function(&f);
    // globals
    let mut f = body();
    f.instructions().i32_const(n as i32).end();
    code.function(&f);
    // global_get(index)
    code.function(&dispatch(globals, |sink, i, ty| {
        sink.global_get(i);
        if ty == I32 {
            sink.i64_extend_i32_u();
        }
    }));
    // global_set(index, value)
    code.function(&dispatch(globals, |sink, i, ty| {
        sink.local_get(1);
        if ty == I32 {
            sink.i32_wrap_i64();
        }
        sink.global_set(i);
    }));

    let mut module = Module::new();
    module
        .section(&types)
        .section(&imports)
        .section(&functions)
        .section(&own)
        .section(&exports)
        .section(&code);
    module
}
