// sandlot_tools: the tools this session may call, as async functions.
//
//   const tools = require("sandlot_tools");
//   const found = await tools.search({ query: "x" });
//
// Each takes its arguments as one object and resolves to the tool's value; a call
// that fails rejects with a ToolError, whose `kind` names the failure (tool_error,
// invalid_arguments, unknown_tool, timeout, too_large, budget_exceeded, protocol).
// `await tools.tools()` lists them. Calls go to the host through the endpoint named
// in SANDLOT_TOOLS, which the agent opens for each run that may call tools.
"use strict";
const net = require("net");

class ToolError extends Error {
  constructor(message, kind) {
    super(message);
    this.name = "ToolError";
    this.kind = kind || "tool_error";
  }
}

let nextId = 1;

function endpoint() {
  const address = process.env.SANDLOT_TOOLS || "";
  if (!address) {
    throw new ToolError(
      "this run has no tools: open the session with tools (SANDLOT_TOOLS is not set)",
      "protocol",
    );
  }
  // A socket's path, or `@NAME` for an abstract socket.
  return address.startsWith("@") ? "\0" + address.slice(1) : address;
}

// One request frame out, one answer frame back, over a connection of its own: calls
// made side by side (Promise.all) go side by side.
function exchange(request) {
  return new Promise((resolve, reject) => {
    let path;
    try {
      path = endpoint();
    } catch (error) {
      reject(error);
      return;
    }
    const body = Buffer.from(JSON.stringify(Object.assign({ v: 1, id: nextId++ }, request)), "utf8");
    const head = Buffer.alloc(4);
    head.writeUInt32LE(body.length, 0);
    let received = Buffer.alloc(0);
    const socket = net.createConnection({ path }, () => socket.write(Buffer.concat([head, body])));
    socket.on("data", (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 4) return;
      const size = received.readUInt32LE(0);
      if (received.length < 4 + size) return;
      socket.destroy();
      try {
        resolve(JSON.parse(received.subarray(4, 4 + size).toString("utf8")));
      } catch (error) {
        reject(new ToolError("the answer is not JSON", "protocol"));
      }
    });
    socket.on("error", (error) =>
      reject(
        new ToolError(
          `cannot reach the tool endpoint (${error.message}): the run that offered the tools is over`,
          "protocol",
        ),
      ),
    );
    socket.on("close", () =>
      reject(new ToolError("the tool endpoint closed the connection: the run is over, the sandbox holds too many connections to it, or it is at its process limit", "protocol")),
    );
  });
}

function failure(answer) {
  const error = answer.error || {};
  return new ToolError(error.message || "the call failed", error.kind);
}

async function call(name, args) {
  const answer = await exchange({ op: "call", tool: name, args: args || {} });
  if (answer.ok) return answer.value;
  throw failure(answer);
}

async function tools() {
  const answer = await exchange({ op: "list" });
  if (answer.ok) return answer.tools;
  throw failure(answer);
}

// Any other name is a tool: the host says whether the session has it.
module.exports = new Proxy(
  { ToolError, call, tools },
  {
    get(target, name) {
      if (typeof name !== "string" || name in target || name === "then" || name.startsWith("__")) {
        return target[name];
      }
      return (args) => call(name, args);
    },
  },
);
