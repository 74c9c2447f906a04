// Queries of commits as git shows them: the snapshot tree with ref names (``log --graph``), one commit
// with what it changed per node (``show``), and which chunks each commit changed (the page's heatmap).
import { ZSCorrupt, ZSError } from "../errors.js";
import { ChangeQueries, NODE_SETS, txlog } from "./changes.js";
import { layout, topoOrder } from "./loggraph.js";
import { compareText } from "./refspec.js";
import { historyFromTimeline } from "./header.js";
import { CHUNK_HISTORY, CHUNK_REF, NODE, TXLOG, keyPrefix, pathOf, split } from "./schema.js";
import { SnapshotIds, coordsAndId } from "./tuples.js";

/** A set's name -> [the change as ``show`` names it, the node type]. */
const CHANGES = Object.fromEntries(NODE_SETS.map((name) => [name, [name.replace("_", " ").slice(0, -1), name.split("_")[1].slice(0, -1)]]));

/** The snapshot tree and single commits, with the branch and tag names at them. */
export class CommitQueries extends ChangeQueries {
  /** Snapshot id -> the ``branch:NAME`` / ``tag:NAME`` refs at it, branches first, each sorted. */
  async refNames() {
    const refs = (await this.refs()).sort((a, b) => Number(a.type !== "branch") - Number(b.type !== "branch") || compareText(a.name, b.name));
    /** @type {Map<string, string[]>} */
    const out = new Map();
    for (const ref of refs) {
      if (!("snapshot_id" in ref)) continue;
      if (!out.has(ref.snapshot_id)) out.set(ref.snapshot_id, []);
      /** @type {string[]} */ (out.get(ref.snapshot_id)).push(`${ref.type}:${ref.name}`);
    }
    return out;
  }

  /**
   * The lines of a git-style graph of REF's history (default main), or with ``all`` of every branch and tag:
   * each snapshot once, children above parents; a snapshot's line carries its fields, ``refs`` and ``column``
   * (``zs log --graph --json`` prints those), a line joining lanes only ``graph``.
   * @param {{ref?: string | null, all?: boolean, maxCount?: number | null}} [options]
   */
  async graph(options = {}) {
    const { ref = null, all = false, maxCount = null } = options;
    if (maxCount !== null && !(Number.isInteger(maxCount) && maxCount >= 0)) throw new ZSError(`maxCount must be an integer >= 0, not ${maxCount}`);
    const tips = all ? (await this.refs()).filter((r) => "snapshot_id" in r).map((r) => r.snapshot_id) : [await this.resolve(ref ?? "main")];
    /** @type {Map<string, any>} */
    const snapshots = new Map();
    for (const tip of tips) {
      for await (const [sid, value] of this.ancestry(tip)) {
        if (snapshots.has(sid)) break;  // the rest of this history is drawn already
        snapshots.set(sid, this.snapshotDict(sid, value));
      }
    }
    const names = await this.refNames();
    const lines = [];
    let shown = 0;
    for (const [text, snapshot] of layout(topoOrder([...snapshots.values()]))) {
      if (maxCount !== null && shown === maxCount) break;
      if (snapshot === null) {
        lines.push({ graph: text });
      } else {
        lines.push({ graph: text, ...snapshot, refs: names.get(snapshot.id) ?? [] });
        shown += 1;
      }
    }
    return lines;
  }

  /**
   * ``zs show REF --json``: the snapshot's fields, ``refs`` at it, ``changes`` per node changed (path, id,
   * node_type, change, chunks), ``moves`` and ``log_missing``.
   * @param {string} ref
   */
  async show(ref) {
    const sid = await this.resolve(ref);
    /** @type {Record<string, any>} */
    const out = this.snapshotDict(sid, /** @type {any} */ (await this.snapshotValue(sid)));
    out.refs = (await this.refNames()).get(sid) ?? [];
    Object.assign(out, { changes: [], moves: [], log_missing: false });
    if (out.parent_id === null) return out;  // the initial snapshot: icechunk writes no log for it
    const record = await this.one(TXLOG, [sid]);
    if (record === null) throw new ZSCorrupt(`${this.name}: snapshot ${sid} has no transaction log record`);
    const tx = txlog(record);
    out.log_missing = tx.lostLogs.includes(sid);
    const paths = new Map([...await this.paths(out.parent_id), ...await this.paths(sid)]);  // a deleted node: its parent's path
    /** @type {Map<string, any>} */
    const changes = new Map();
    NODE_SETS.forEach((name, i) => {
      const [change, nodeType] = CHANGES[name];
      for (const nodeId of tx.sets[i]) {
        if (!changes.has(nodeId)) changes.set(nodeId, { path: paths.get(nodeId) ?? null, id: nodeId, node_type: nodeType, change, chunks: 0 });
      }
    });
    for (const [nodeId, count] of tx.updatedChunks) {
      if (!changes.has(nodeId)) {
        changes.set(nodeId, { path: paths.get(nodeId) ?? null, id: nodeId, node_type: "array", change: "updated chunks", chunks: 0 });
      }
      changes.get(nodeId).chunks = count;
    }
    out.changes = [...changes.values()].sort((a, b) => Number(a.path === null) - Number(b.path === null) ||
      compareText(a.path ?? "", b.path ?? "") || compareText(a.id, b.id));
    out.moves = tx.ownMoves.map((m) => [m[0], m[1]]);
    return out;
  }

  /** Node id -> path at a snapshot. @param {string} snapshotId */
  async paths(snapshotId) {
    /** @type {Map<string, string>} */
    const out = new Map();
    for await (const [k, v] of this.records(NODE, [snapshotId])) out.set(/** @type {string} */ (v[0]), pathOf(/** @type {string[]} */ (k[1])));
    return out;
  }

  /**
   * Which chunks of the array PATH (as REF has it) each commit in REF's history changed: ``commits``
   * (snapshots, oldest first), and per change (one per chunk a commit changed, in coordinate order) its
   * coordinates (``coords``: ``ndim`` numbers each, one flat array) and commit (``commit``: an index into
   * ``commits``); ``num_chunks`` of the array at REF. Typed arrays: millions of changes stay compact.
   * @param {string} ref @param {string} path
   */
  async chunkChanges(ref, path) {
    const node = await this.arrayAt(ref, path);
    const depths = await this.historyDepths(await this.resolve(ref));
    const ndim = /** @type {number[]} */ (node.shape).length;
    const rows = new ChangeRows(ndim);
    if (historyFromTimeline(this.recordsFormat)) {
      await this.timelineRows(node.id, rows);  // millions of changes: decoded a block at a time
    } else {
      for await (const change of this.historyEntries(node.id)) rows.add(this.name, node.id, change.coords, change.snapshotId);
    }
    const found = new Map();
    for (const sid of rows.ids.keys()) if (depths.has(sid)) found.set(sid, await this.snapshotValue(sid));
    const order = [...found.keys()].sort((a, b) => {
      const x = found.get(a).flushedAt, y = found.get(b).flushedAt;
      return x !== y ? (x < y ? -1 : 1) : compareText(a, b);
    });
    const position = new Map(order.map((sid, i) => [sid, i]));
    const column = new Int32Array(rows.ids.size).fill(-1);
    for (const [sid, i] of rows.ids) column[i] = position.get(sid) ?? -1;
    const [coords, commit] = rows.ordered(column);
    return {
      path: node.path, node_id: node.id, num_chunks: node.numChunks, ndim,
      commits: order.map((sid) => this.snapshotDict(sid, found.get(sid))), coords, commit,
    };
  }

  /**
   * The changes of every chunk of the array ``nodeId`` in an archive whose history is its C timeline (format
   * 5 on), into ``rows``: each C record's coordinates and snapshot, corrected by the array's H exceptions.
   * @param {string} nodeId @param {ChangeRows} rows
   */
  async timelineRows(nodeId, rows) {
    /** @type {Map<string, [number[], string, boolean]>} */
    const exceptions = new Map();  // few: where a transaction log and the timeline disagree
    for await (const [k, v, rec] of this.records(CHUNK_HISTORY, [nodeId])) {
      if (k.length !== 4 || !Array.isArray(k[1]) || typeof k[3] !== "string") throw new TypeError("chunk history key");
      const inLog = split(rec)[3] === 1 ? true : v[0] === true;
      exceptions.set(`${k[1].join(",")}|${k[3]}`, [/** @type {number[]} */ (k[1]), k[3], inLog]);
    }
    const prefix = keyPrefix(CHUNK_REF, [nodeId]);
    const at = new Float64Array(Math.max(rows.ndim, 1));
    const ids = new SnapshotIds();
    for await (const { block, lo, hi } of this.zs.searchSpans({ prefix })) {
      const { payload, starts } = block;
      for (let i = lo; i < hi; i++) {
        let sid = coordsAndId(payload, starts[i] + prefix.length, rows.ndim, at, ids);
        let coords = at;
        if (sid === null) {  // another shape than a plain timeline key: decoded in full, and named if wrong
          const key = split(block.record(i))[1];
          coords = /** @type {any} */ (key[1]);
          sid = /** @type {any} */ (key[2]);
          rows.check(this.name, nodeId, coords, /** @type {string} */ (sid));
        }
        if (exceptions.size && exceptions.get(`${Array.from(coords).join(",")}|${sid}`)?.[2] === false) continue;
        rows.add(this.name, nodeId, coords, /** @type {string} */ (sid));
      }
    }
    for (const [coords, sid, inLog] of exceptions.values()) if (inLog) rows.add(this.name, nodeId, coords, sid);
  }
}

/** Chunk changes gathered as flat typed arrays: ``ndim`` coordinates and a snapshot index per change. */
class ChangeRows {
  /** @param {number} ndim */
  constructor(ndim) {
    this.ndim = ndim;
    this.n = 0;
    this.coords = new Float64Array(1024 * Math.max(ndim, 1));
    this.which = new Int32Array(1024);
    /** @type {Map<string, number>} */
    this.ids = new Map();
  }

  /**
   * ZSCorrupt naming the record unless ``coords`` are ``ndim`` integers >= 0 and ``sid`` a text.
   * @param {string} name @param {string} nodeId @param {any} coords @param {any} sid
   */
  check(name, nodeId, coords, sid) {
    if (!Array.isArray(coords) || coords.length !== this.ndim || !coords.every((c) => Number.isSafeInteger(c) && c >= 0) ||
        typeof sid !== "string") {
      throw new ZSCorrupt(`${name}: chunk history record ${JSON.stringify([nodeId, coords, sid], (_, x) => (typeof x === "bigint" ? String(x) : x))} ` +
        `does not hold ${this.ndim} coordinates of the array and a snapshot id`);
    }
  }

  /** @param {string} name @param {string} nodeId @param {ArrayLike<number>} coords @param {string} sid */
  add(name, nodeId, coords, sid) {
    if (Array.isArray(coords)) this.check(name, nodeId, coords, sid);
    if (this.n === this.which.length) {
      const grownCoords = new Float64Array(2 * this.coords.length), grownWhich = new Int32Array(2 * this.which.length);
      grownCoords.set(this.coords);
      grownWhich.set(this.which);
      [this.coords, this.which] = [grownCoords, grownWhich];
    }
    let index = this.ids.get(sid);
    if (index === undefined) this.ids.set(sid, (index = this.ids.size));
    for (let d = 0; d < this.ndim; d++) this.coords[this.n * this.ndim + d] = coords[d];
    this.which[this.n++] = index;
  }

  /**
   * The changes whose snapshot has a column (>= 0), in coordinate order then column: [coords, columns].
   * @param {Int32Array} column
   * @returns {[Float64Array, Int32Array]}
   */
  ordered(column) {
    const { ndim, coords, which } = this;
    const kept = [];
    for (let i = 0; i < this.n; i++) if (column[which[i]] >= 0) kept.push(i);
    const compare = (/** @type {number} */ i, /** @type {number} */ j) => {
      for (let d = 0; d < ndim; d++) {
        const x = coords[i * ndim + d], y = coords[j * ndim + d];
        if (x !== y) return x - y;
      }
      return column[which[i]] - column[which[j]];
    };
    let sorted = true;  // a timeline comes in key order: most arrays need no sort
    for (let k = 1; k < kept.length && sorted; k++) sorted = compare(kept[k - 1], kept[k]) <= 0;
    if (!sorted) kept.sort(compare);
    const outCoords = new Float64Array(kept.length * ndim), outColumns = new Int32Array(kept.length);
    kept.forEach((i, k) => {
      for (let d = 0; d < ndim; d++) outCoords[k * ndim + d] = coords[i * ndim + d];
      outColumns[k] = column[which[i]];
    });
    return [outCoords, outColumns];
  }
}
