"use strict";
// The playground's script: served as a file, so the page's CSP allows no inline script.
// Everything the code printed is put into the page as text, never as markup.
const $ = (id) => document.getElementById(id);
let session = null;

// The token requests go with: the field's value once it is entered.
let token = (localStorage.getItem("sandlot-token") || "").trim();
$("token").value = token;
// A new token may see other languages, and the session belongs to the old one, which
// closes it.
$("token").addEventListener("change", async () => {
  await closeSession();
  token = $("token").value.trim();
  localStorage.setItem("sandlot-token", token);
  await loadLanguages();
});

// What the page says about itself: "ready", "running…", or an error, which stands out.
function say(text, kind) {
  $("status").textContent = text;
  $("status").className = { error: "error", busy: "", done: "" }[kind] ?? "muted";
}

function headers(extra) {
  const h = Object.assign({ "content-type": "application/json" }, extra || {});
  if (token) h.authorization = "Bearer " + token;
  return h;
}

async function failure(response) {
  const body = await response.json().catch(() => ({}));
  return new Error(body.error ? body.error.message : "HTTP " + response.status);
}

async function api(method, path, body) {
  const response = await fetch(path, { method, headers: headers(), body: body ? JSON.stringify(body) : undefined });
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

async function loadLanguages() {
  try {
    const listing = await api("GET", "/v1/languages");
    $("language").replaceChildren(...listing.languages.map((l) => new Option(l.name + " (" + l.id + ")", l.id)));
    $("language").value = "python";
    $("backend").replaceChildren(new Option("auto", "auto"), ...listing.backends.map((b) => new Option(b, b)));
    say("ready");
  } catch (e) {
    $("language").replaceChildren();
    say("cannot list the languages: " + e.message + " (enter the server's token above)", "error");
  }
}

function clear() {
  for (const id of ["stdout", "stderr"]) $(id).textContent = "";
  $("plots").replaceChildren();
  $("files").replaceChildren();
  $("tools").replaceChildren();
  $("tools-title").hidden = true;
}

// One line per tool call the code made, as it ends: name, outcome, time, and why it
// failed.
function toolCall(call) {
  const item = document.createElement("li");
  let text = (call.name || "(no tool named)") + " · " + call.outcome + " · " +
    Number(call.duration_ms).toFixed(1) + " ms";
  if (call.message) text += " · " + call.message;
  item.textContent = text;
  if (call.outcome !== "ok") item.className = "failed";
  $("tools").append(item);
  $("tools-title").hidden = false;
  $("tools-title").textContent = "tool calls (" + $("tools").children.length + ")";
}

function show(result) {
  $("stdout").textContent = result.stdout;
  $("stderr").textContent = result.stderr;
  // A streamed run showed its calls as they ended; any other shows them now.
  const calls = result.tool_calls || [];
  if ($("tools").children.length !== calls.length) {
    $("tools").replaceChildren();
    calls.forEach(toolCall);
  }
  say("exit " + result.exit_code + " · " + result.end.reason + " · " +
    result.duration_ms.toFixed(1) + " ms · " + result.backend,
    result.end.reason === "completed" && result.exit_code === 0 ? "done" : "error");
  for (const file of result.artifacts) {
    const url = "data:" + file.mime + ";base64," + file.base64;
    if (file.mime.startsWith("image/")) {
      const img = document.createElement("img");
      img.src = url;
      img.alt = file.path;
      $("plots").append(img);
    } else {
      const link = document.createElement("a");
      link.href = url;
      link.download = file.path;
      link.textContent = file.path + " (" + file.size + " bytes)";
      $("files").append(link, document.createElement("br"));
    }
  }
}

async function streamed(path, body) {
  const response = await fetch(path, {
    method: "POST", headers: headers({ accept: "text/event-stream" }), body: JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (!event) continue;
      const payload = JSON.parse(data);
      if (event === "stdout") $("stdout").textContent += payload.text;
      else if (event === "stderr") $("stderr").textContent += payload.text;
      else if (event === "tool_call_end") toolCall(payload);
      else if (event === "result") show(payload);
      else if (event === "error") throw new Error(payload.error.message);
    }
  }
}

async function closeSession() {
  if (!session) return;
  const id = session.id;
  session = null;
  $("session").textContent = "";
  await api("DELETE", "/v1/sessions/" + id).catch(() => {});
}

async function run() {
  const language = $("language").value, backend = $("backend").value, code = $("code").value;
  if (!language) {
    say("no language to run: the list is empty until the server answers (enter its token above)", "error");
    return;
  }
  const ask = { language };
  if (backend !== "auto") ask.backend = backend;
  clear();
  say("running…", "busy");
  $("run").disabled = true;
  try {
    if ($("keep").checked) {
      if (!session || session.language !== language || session.backend !== backend) {
        await closeSession();
        say("opening a session…", "busy");
        const opened = await api("POST", "/v1/sessions", ask);
        session = { id: opened.id, language, backend };
        $("session").textContent = "session " + opened.id.slice(0, 10) + "… on " + opened.backend;
        say("running…", "busy");
      }
      await streamed("/v1/sessions/" + session.id + "/run", { code });
    } else {
      await closeSession();
      show(await api("POST", "/v1/run", Object.assign({ code }, ask)));
    }
  } catch (e) {
    say("error: " + e.message, "error");
    if (/no session/.test(e.message)) { session = null; $("session").textContent = ""; }
  } finally {
    $("run").disabled = false;
  }
}

$("run").addEventListener("click", run);
$("reset").addEventListener("click", closeSession);
// Tab indents the line (Shift+Tab takes it back) as in any code editor; after Escape,
// Tab moves on to the next control, so the keyboard is never trapped here.
let tabLeaves = false;
$("code").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { run(); return; }
  if (e.key === "Escape") { tabLeaves = true; return; }
  if (e.key !== "Tab" || tabLeaves || e.ctrlKey || e.altKey || e.metaKey) { tabLeaves = false; return; }
  e.preventDefault();
  const area = $("code"), text = area.value;
  const start = area.selectionStart, end = area.selectionEnd;
  const lineStart = text.lastIndexOf("\n", start - 1) + 1;
  if (e.shiftKey) {
    const removed = (text.slice(lineStart).match(/^ {1,4}/) || [""])[0].length;
    area.setRangeText("", lineStart, lineStart + removed, "preserve");
    area.setSelectionRange(Math.max(lineStart, start - removed), Math.max(lineStart, end - removed));
  } else {
    area.setRangeText("    ", start, end, "end");
  }
});
$("code").addEventListener("blur", () => { tabLeaves = false; });
window.addEventListener("pagehide", () => {
  if (session) fetch("/v1/sessions/" + session.id, { method: "DELETE", headers: headers(), keepalive: true });
});
loadLanguages();
