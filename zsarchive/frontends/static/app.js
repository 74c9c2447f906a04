// The archive's web page, one page for two hosts: served by `zs serve`, it asks the server's JSON API;
// written by `zs site` beside an archive on any static host (or given ?archive=URL, or a file picked),
// it asks the JavaScript reader in the browser, which answers the same requests with the same JSON
// (reader/frontends/pageapi.js). Every string that comes from the archive is inserted with textContent
// (never innerHTML): names, messages and metadata are untrusted.

const HEATMAP_BINS = 128;  // chunk bins the page asks for (the server caps and computes them)

const $ = (id) => document.getElementById(id);

function el(tag, text, attrs) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  return node;
}

function button(text, onClick, attrs) {
  const b = el("button", text, Object.assign({type: "button"}, attrs || {}));
  b.addEventListener("click", onClick);
  return b;
}

function count(n, noun) {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

function json(value) {
  return value === null || value === undefined ? "-" : JSON.stringify(value);
}

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

// -- where the answers come from ---------------------------------------------------------------

/** The answers of `zs serve`'s API, over HTTP. */
const serverSource = {
  async answer(name, params) {
    const response = await fetch(`api/${name}?${new URLSearchParams(params)}`);
    const answer = await response.json();
    if (!response.ok) throw new Error(answer.error || `${response.status} ${response.statusText}`);
    return answer;
  },
};

let source = serverSource;

/** The archive the page reads in the browser: ?archive=URL, else the one site.json names (`zs site`). */
async function readerSource() {
  const named = new URLSearchParams(location.search).get("archive");
  const response = await fetch("site.json", {cache: "no-store"}).catch(() => null);
  const site = response && response.ok ? await response.json() : null;  // none: the page is zs serve's
  const archive = named || (site && site.archive);
  if (!archive) return null;
  return openReader(new URL(archive, location.href).href);
}

async function openReader(archive) {
  const {PageAPI} = await import("./reader/frontends/pageapi.js");
  return PageAPI.open(archive);
}

async function api(name, params) {
  const query = {};
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") query[key] = String(value);
  }
  return source.answer(name, query);
}

function guarded(action) {
  return async (...args) => {
    try {
      showError("");
      await action(...args);
    } catch (err) {
      showError(err.message);
    }
  };
}

let started = false;  // the first view does not scroll: later views come into sight when asked for

function reveal(id) {
  const section = $(id);
  section.hidden = false;
  if (started) section.scrollIntoView({block: "nearest"});
}

function fill(tbody, rows, cells) {
  tbody.replaceChildren();
  for (const row of rows) {
    const tr = el("tr");
    for (const cell of cells(row)) {
      const td = el("td");
      td.append(cell instanceof Node ? cell : document.createTextNode(cell === null ? "-" : String(cell)));
      tr.append(td);
    }
    tbody.append(tr);
  }
  return tbody;
}

// -- branches, tags and the graph --------------------------------------------------------------

async function loadSummary() {
  const summary = await api("summary");
  $("archive-name").textContent = summary.name;
  const counts = summary.header.counts || {};
  $("archive-facts").textContent =
    `format ${summary.header.format_version}, ${counts.snapshots || 0} snapshots, ` +
    `${counts["chunk refs"] || 0} chunk ref records`;
  const refs = $("refs");
  refs.replaceChildren();
  for (const ref of summary.refs) {
    if (!ref.snapshot_id) continue;  // a deleted tag
    const name = `${ref.type}:${ref.name}`;
    refs.append(button(name, guarded(() => loadCommits(name)), {class: `ref ${ref.type}`, "data-ref": name}));
  }
  return summary;
}

async function loadGraph() {
  const lines = await api("graph");
  const graph = $("graph");
  graph.replaceChildren();
  const width = Math.max(0, ...lines.map((line) => line.graph.length));
  for (const line of lines) {
    const row = el("div", null, {class: "graph-line"});
    row.append(el("span", line.graph.padEnd(width), {class: "lanes"}));
    if (line.id) {
      row.dataset.id = line.id;
      row.append(button(line.id, guarded(() => showCommit(line.id)), {class: "commit", "data-id": line.id}));
      for (const name of line.refs) {
        row.append(button(name, guarded(() => loadCommits(name)), {class: "ref", "data-ref": name}));
      }
      row.append(el("span", line.flushed_at, {class: "time"}), el("span", line.message, {class: "message"}));
    }
    graph.append(row);
  }
}

// -- commits -----------------------------------------------------------------------------------

let currentRef = null;

async function loadCommits(ref) {
  currentRef = ref;
  const since = $("since").value, until = $("until").value;
  const rows = await api("log", {ref: ref, since: since, until: until});
  $("commits-ref").textContent = ref ? `of ${ref}` : "(every snapshot)";
  const table = $("commits");
  const tbody = fill(table.tBodies[0], rows, (c) => [
    button(c.id, guarded(() => showCommit(c.id)), {class: "commit", "data-id": c.id}), c.flushed_at, c.message]);
  rows.forEach((c, i) => { tbody.rows[i].dataset.id = c.id; });
  // what the table shows now, for whoever waits on it
  Object.assign(table.dataset, {ref: ref || "", since: since, until: until});
  reveal("commits-section");
}

async function showCommit(id) {
  const commit = await api("show", {ref: `snapshot:${id}`});
  $("commit-id").textContent = commit.id;
  const facts = $("commit-facts");
  facts.replaceChildren();
  const add = (term, value, key) => {
    facts.append(el("dt", term), el("dd", value, {"data-key": key}));
  };
  add("snapshot", commit.id, "id");
  add("parent", commit.parent_id || "-", "parent_id");
  add("flushed at", commit.flushed_at, "flushed_at");
  add("refs", commit.refs.join(", ") || "-", "refs");
  add("message", commit.message, "message");
  add("metadata", json(commit.metadata), "metadata");
  if (commit.log_missing) add("note", "its transaction log was gone before it was archived", "log_missing");
  $("tree-button").onclick = guarded(() => loadTree(`snapshot:${commit.id}`));
  const tbody = fill($("changes").tBodies[0], commit.changes, (c) => {
    const opens = c.node_type === "array" && !c.change.startsWith("deleted") && c.path;
    return [opens ? button(c.path, guarded(() => openArray(`snapshot:${commit.id}`, c.path)),
                           {class: "path", "data-path": c.path}) : (c.path || c.id),
            c.node_type, c.change, c.chunks];
  });
  commit.changes.forEach((c, i) => { tbody.rows[i].dataset.id = c.id; });
  const moves = $("moves");
  moves.replaceChildren(...commit.moves.map(([from, to]) => el("li", `${from} → ${to}`)));
  if (!commit.moves.length) moves.append(el("li", "none"));
  reveal("commit-section");
}

// -- the node tree -----------------------------------------------------------------------------

async function loadTree(ref) {
  const tree = await api("ls", {ref: ref});
  $("tree-ref").textContent = `${ref} (snapshot ${tree.snapshot_id})`;
  const tbody = fill($("tree").tBodies[0], tree.nodes, (n) => [
    n.node_type === "array" ? button(n.path, guarded(() => openArray(ref, n.path)), {class: "path", "data-path": n.path})
                            : n.path,
    n.node_type, n.shape ? n.shape.join(" × ") : "-", typeof n.dtype === "string" ? n.dtype : json(n.dtype),
    n.chunk_shape ? n.chunk_shape.join(" × ") : "-", n.num_chunks ? n.num_chunks.join(" × ") : "-",
    json(n.attributes)]);
  tree.nodes.forEach((n, i) => { tbody.rows[i].dataset.path = n.path; });
  reveal("tree-section");
}

// -- an array: the heatmap of its chunk changes ------------------------------------------------

let heatmap = null;

async function openArray(ref, path) {
  const data = await api("heatmap", {ref: ref, path: path, bins: HEATMAP_BINS});
  heatmap = Object.assign(data, {ref: ref});
  $("array-path").textContent = path;
  $("array-ref").textContent = ref;
  $("array-facts").textContent =
    `${count(data.total_chunks, "chunk")} (grid ${data.num_chunks.join(" × ") || "scalar"}); ` +
    `${count(data.changes, "chunk change")} in ${count(data.columns.reduce((s, c) => s + c.commits, 0), "commit")}` +
    (data.outside ? `; ${data.outside} beyond the grid at this snapshot` : "");
  $("heatmap-note").textContent = "";
  $("cell-chunks").replaceChildren();
  drawHeatmap(data);
  reveal("array-section");
}

function drawHeatmap(data) {
  const canvas = $("heatmap");
  const columns = data.columns.length;
  const bins = data.bin_starts.length;
  const cellWidth = Math.max(4, Math.min(40, Math.floor(720 / Math.max(columns, 1))));
  const cellHeight = Math.max(2, Math.min(24, Math.floor(384 / bins)));
  canvas.width = Math.max(1, columns * cellWidth);
  canvas.height = bins * cellHeight;
  Object.assign(canvas.dataset, {cellWidth, cellHeight, columns, bins});
  const context = canvas.getContext("2d");
  context.fillStyle = "#f4f4f4";
  context.fillRect(0, 0, canvas.width, canvas.height);
  const most = Math.max(1, ...data.counts.map((column) => Math.max(0, ...column)));
  data.counts.forEach((column, c) => {
    column.forEach((count, b) => {
      if (!count) return;
      // from pale yellow (one chunk) to deep red (the most of any cell), on a log scale
      const level = most > 1 ? Math.log(count) / Math.log(most) : 1;
      context.fillStyle = `rgb(${Math.round(253 - 68 * level)}, ${Math.round(224 - 196 * level)}, ${Math.round(120 - 92 * level)})`;
      const gap = cellHeight >= 6 ? 1 : 0;  // cells large enough to tell apart get a seam
      context.fillRect(c * cellWidth, b * cellHeight, cellWidth - gap, cellHeight - gap);
    });
  });
}

async function pickCell(event) {
  if (!heatmap) return;
  const canvas = $("heatmap");
  const box = canvas.getBoundingClientRect();
  const column = Math.floor((event.clientX - box.left) / Number(canvas.dataset.cellWidth));
  const bin = Math.floor((event.clientY - box.top) / Number(canvas.dataset.cellHeight));
  if (column < 0 || column >= heatmap.columns.length || bin < 0 || bin >= heatmap.bin_starts.length) return;
  const info = heatmap.columns[column];
  const first = heatmap.bin_starts[bin];
  const end = bin + 1 < heatmap.bin_starts.length ? heatmap.bin_starts[bin + 1] : heatmap.total_chunks;
  const commits = info.commits === 1 ? `commit ${info.first.id} (${info.first.message})`
    : `${info.commits} commits ${info.first.id} … ${info.last.id}`;
  $("heatmap-note").textContent =
    `${commits}: ${heatmap.counts[column][bin]} of chunks ${first} to ${end - 1} (C order)`;
  const cell = await api("cell", {ref: heatmap.ref, path: heatmap.path, bins: heatmap.bin_starts.length,
                                  bin: bin, column: column});
  const list = $("cell-chunks");
  list.replaceChildren();
  for (const coords of cell.coords) {
    const name = coords.join(",");
    const item = el("li");
    item.append(button(`chunk ${name}`, guarded(() => chunkHistory(heatmap.ref, heatmap.path, name)),
                       {class: "chunk", "data-coords": name}));
    list.append(item);
  }
  if (cell.more) list.append(el("li", `and ${cell.more} more`));
}

async function chunkHistory(ref, path, coords) {
  const rows = await api("chunk-log", {ref: ref, path: path, coords: coords});
  $("chunk-name").textContent = `${coords} of ${path} in the history of ${ref}`;
  const tbody = fill($("chunk-log").tBodies[0], rows, (c) => [
    button(c.id, guarded(() => showCommit(c.id)), {class: "commit", "data-id": c.id}), c.flushed_at, c.message]);
  rows.forEach((c, i) => { tbody.rows[i].dataset.id = c.id; });
  reveal("chunk-section");
}

// -- start -------------------------------------------------------------------------------------

async function show() {
  const summary = await loadSummary();
  await loadGraph();
  const main = summary.refs.find((r) => r.type === "branch" && r.name === "main");
  await loadCommits(main ? "branch:main" : null);
  started = true;
  document.body.dataset.ready = "true";
}

async function openPicked(archive) {
  started = false;
  delete document.body.dataset.ready;
  for (const id of ["commit-section", "tree-section", "array-section", "chunk-section"]) $(id).hidden = true;
  source = await openReader(archive);
  await show();
}

async function start() {
  $("open-file").addEventListener("change", guarded(async () => {
    const file = $("open-file").files[0];
    if (file) await openPicked(file);
  }));
  $("open-url").addEventListener("submit", (event) => {
    event.preventDefault();
    const url = $("archive-url").value.trim();
    if (url) guarded(() => openPicked(new URL(url, location.href).href))();
  });
  $("commit-filter").addEventListener("submit", (event) => {
    event.preventDefault();
    guarded(() => loadCommits(currentRef))();
  });
  $("all-commits").addEventListener("click", guarded(() => loadCommits(null)));
  $("heatmap").addEventListener("click", guarded(pickCell));
  source = (await readerSource()) || serverSource;
  await show();
}

document.addEventListener("DOMContentLoaded", guarded(start));
