// Queries of commits as git shows them: the snapshot tree with ref names (``log --graph``), one commit
// with what it changed per node (``show``), and which chunks each commit changed (the page's heatmap).
import { ZSCorrupt, ZSError } from "../errors.js";
import { ChangeQueries, NODE_SETS, txlog } from "./changes.js";
import { layout, topoOrder } from "./loggraph.js";
import { compareText } from "./refspec.js";
import { NODE, TXLOG, pathOf } from "./schema.js";

/** A set's name -> [the change as ``show`` names it, the node type]. */
const CHANGES = Object.fromEntries(NODE_SETS.map((name) => [name, [name.replace("_", " ").slice(0, -1), name.split("_")[1].slice(0, -1)]]));

/** The snapshot tree and single commits, with the branch and tag names at them. */
export class CommitQueries extends ChangeQueries {
  /** Snapshot id -> the ``branch:NAME`` / ``tag:NAME`` refs at it, branches first, each sorted. */
  async refNames() {
    const refs = (await this.refs()).sort((a, b) => (a.type !== "branch") - (b.type !== "branch") || compareText(a.name, b.name));
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
    out.changes = [...changes.values()].sort((a, b) => (a.path === null) - (b.path === null) ||
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
    /** @type {Map<string, number>} */
    const ids = new Map();
    let coords = new Float64Array(1024 * Math.max(ndim, 1)), which = new Int32Array(1024);
    let n = 0;
    for await (const change of this.historyEntries(node.id)) {
      const at = change.coords;
      if (!Array.isArray(at) || at.length !== ndim || !at.every((c) => Number.isSafeInteger(c) && c >= 0)) {
        throw new ZSCorrupt(`${this.name}: chunk history record ${JSON.stringify([node.id, at, change.snapshotId])} does ` +
          `not hold ${ndim} coordinates of the array`);
      }
      if (!ids.has(change.snapshotId)) ids.set(change.snapshotId, ids.size);
      if (n === which.length) {
        const grownCoords = new Float64Array(2 * coords.length), grownWhich = new Int32Array(2 * which.length);
        grownCoords.set(coords);
        grownWhich.set(which);
        [coords, which] = [grownCoords, grownWhich];
      }
      coords.set(at, n * ndim);
      which[n++] = /** @type {number} */ (ids.get(change.snapshotId));
    }
    const found = new Map();
    for (const sid of ids.keys()) if (depths.has(sid)) found.set(sid, await this.snapshotValue(sid));
    const order = [...found.keys()].sort((a, b) => {
      const x = found.get(a).flushedAt, y = found.get(b).flushedAt;
      return x !== y ? (x < y ? -1 : 1) : compareText(a, b);
    });
    const column = new Int32Array(ids.size).fill(-1);
    const position = new Map(order.map((sid, i) => [sid, i]));
    for (const [sid, i] of ids) column[i] = position.get(sid) ?? -1;
    const kept = [];
    for (let i = 0; i < n; i++) if (column[which[i]] >= 0) kept.push(i);
    kept.sort((i, j) => {
      for (let d = 0; d < ndim; d++) {
        const x = coords[i * ndim + d], y = coords[j * ndim + d];
        if (x !== y) return x - y;
      }
      return column[which[i]] - column[which[j]];
    });
    const keptCoords = new Float64Array(kept.length * ndim), keptCommit = new Int32Array(kept.length);
    kept.forEach((i, k) => {
      keptCoords.set(coords.subarray(i * ndim, (i + 1) * ndim), k * ndim);
      keptCommit[k] = column[which[i]];
    });
    return {
      path: node.path, node_id: node.id, num_chunks: node.numChunks, ndim,
      commits: order.map((sid) => this.snapshotDict(sid, found.get(sid))), coords: keptCoords, commit: keptCommit,
    };
  }
}
