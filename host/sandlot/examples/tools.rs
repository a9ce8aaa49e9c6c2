//! Tools: functions of this program that sandboxed code calls, on the in-process wasm
//! backend. The model-written program loops over the application's catalogue, filters
//! and sums, and only its last line comes back; each call is shown here as it
//! ends (`RunOptions::on_tool_call`), and recorded in the run's `tool_calls`.
//!
//! ```sh
//! sandlot runtimes install python       # once: CPython for WASI
//! sandlot runtimes install javascript   # once: QuickJS, built with npm
//! cargo run -p sandlot --example tools
//! ```

use sandlot::tool::{Tool, ToolCall, ToolError, ToolSet};
use sandlot::RunOptions;
use serde_json::{json, Value};
use std::sync::Arc;

/// The application's data: what the tool reads, never the sandbox.
fn catalogue() -> Value {
    json!([
        {"name": "Air 13", "kind": "laptop", "price": 999, "rating": 4.6},
        {"name": "Brick 15", "kind": "laptop", "price": 650, "rating": 3.1},
        {"name": "Pro 14", "kind": "laptop", "price": 1899, "rating": 4.8},
        {"name": "Quiet 2", "kind": "headphones", "price": 299, "rating": 4.4},
        {"name": "Buzz", "kind": "headphones", "price": 35, "rating": 2.9}
    ])
}

fn tools() -> Result<ToolSet, sandlot::Error> {
    let search = Tool::new(
        "search",
        "Products of one kind, with their price and rating.",
        json!({"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]}),
        |args| {
            let kind = args["kind"].as_str().unwrap_or_default();
            let found: Vec<Value> = catalogue()
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["kind"] == kind)
                .cloned()
                .collect();
            if found.is_empty() {
                return Err(ToolError::new(format!("no product of kind {kind:?}")));
            }
            Ok(Value::Array(found))
        },
    )?;
    let mut set = ToolSet::new();
    set.add(search)?;
    Ok(set)
}

/// Each call, as it ends, on this program's stdout.
fn shown() -> RunOptions {
    RunOptions {
        on_tool_call: Some(Arc::new(|call: &ToolCall| {
            println!(
                "  tool call: {} {} ({} bytes back)",
                call.name,
                call.outcome.as_str(),
                call.result_bytes
            )
        })),
        ..RunOptions::default()
    }
}

fn main() -> Result<(), sandlot::Error> {
    let sandlot = sandlot::from_environment()?;
    let tools = tools()?;
    let programs = [
        (
            "python",
            "from sandlot_tools import search, ToolError
rated = [p for kind in ['laptop', 'headphones'] for p in search(kind=kind) if p['rating'] >= 4]
try:
    search(kind='tent')
except ToolError as e:
    print('refused:', e)
print('cost of the', len(rated), 'well rated:', sum(p['price'] for p in rated))",
        ),
        (
            "javascript",
            "const { search, ToolError } = require('sandlot_tools');
const rated = [];
for (const kind of ['laptop', 'headphones']) rated.push(...(await search({ kind })).filter((p) => p.rating >= 4));
try { await search({ kind: 'tent' }); } catch (e) { console.log('refused:', e.message, e instanceof ToolError); }
console.log('cost of the', rated.length, 'well rated:', rated.reduce((s, p) => s + p.price, 0));",
        ),
    ];
    for (language, program) in programs {
        println!("{language}:");
        let mut session = sandlot
            .session(language)
            .backend("wasm")
            .tools(&tools)?
            .open()?;
        let run = session.run_with(program, shown())?;
        assert!(run.success(), "{}", run.stderr_text());
        let last = run
            .stdout_text()
            .lines()
            .last()
            .unwrap_or_default()
            .to_string();
        assert_eq!(
            last,
            "cost of the 3 well rated: 3197",
            "{}",
            run.stdout_text()
        );
        assert_eq!(run.tool_calls.len(), 3);
        println!("  the program said: {last}");
    }
    Ok(())
}
