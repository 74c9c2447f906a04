// Queries of change: one chunk's history, the diff between two snapshots (as ``zs diff --json`` rows),
// the ops log.
import { NotFound, ZSCorrupt, ZSError } from "../errors.js";
import { ChunkQueries, chunkRow } from "./chunks.js";
import { compareCoords } from "./chunkrefs.js";
import { historyFromTimeline } from "./header.js";
import { loadJson } from "./reader.js";
import { chunkCoords, compareText, timeBound } from "./refspec.js";
import { CHUNK_HISTORY, CHUNK_REF, NODE, OPS, TXLOG, pathOf, split } from "./schema.js";
import { formatTime } from "./times.js";

/** A transaction log's node id sets, as icechunk's ``diff`` names them. */
export const NODE_SETS = ["new_groups", "new_arrays", "deleted_groups", "deleted_arrays", "updated_groups", "updated_arrays"];

/**
 * @typedef {{nodeId: string, coords: number[], flushedAt: number, snapshotId: string}} HistoryEntry
 * @typedef {{sets: string[][], updatedChunks: Array<[string, number]>, ownMoves: any[][], moves: any[][], lostLogs: string[]}} Txlog
 */

/**
 * An X record's value: what a snapshot changed since its parent (record version 2 adds the merged logs).
 * @param {any[]} value
 * @returns {Txlog}
 */
export function txlog(value) {
  if (value.length < 8 || !value.every((v) => Array.isArray(v) || v === null)) throw new TypeError("transaction log record");
  const merged = value.length > 8 ? value[8] : null;
  return {
    sets: value.slice(0, 6), updatedChunks: value[6], ownMoves: value[7],
    moves: merged === null || value[10] === null || value[10] === undefined ? value[7] : value[10],
    lostLogs: value.length > 9 && value[9] ? value[9] : [],
  };
}

/** Python's tuple order of (flushed_at, snapshot_id): time, then id. @param {HistoryEntry} a @param {HistoryEntry} b */
const byTime = (a, b) => (a.flushedAt !== b.flushedAt ? (a.flushedAt < b.flushedAt ? -1 : 1) : compareText(a.snapshotId, b.snapshotId));

/** What changed: per chunk, between snapshots, and in the repository's ops log. */
export class ChangeQueries extends ChunkQueries {
  /**
   * ``(node_id, coords, flushed_at, snapshot_id)`` of every commit whose transaction log names a chunk of the
   * array ``nodeId`` (only of ``coords`` when given), in no particular order (one H record per change up to
   * format 3; from format 5 the C timeline corrected by H exceptions).
   * @param {string} nodeId @param {number[] | null} [coords]
   * @returns {AsyncGenerator<HistoryEntry>}
   */
  async *historyEntries(nodeId, coords = null) {
    const key = coords === null ? [nodeId] : [nodeId, coords];
    const timeline = historyFromTimeline(this.recordsFormat);
    /** @type {Map<string, [HistoryEntry, boolean]>} */
    const exceptions = new Map();
    for await (const [k, v, rec] of this.records(CHUNK_HISTORY, key)) {
      if (k.length !== 4) throw new TypeError(`chunk history key of ${k.length} elements`);
      const entry = { nodeId: /** @type {string} */ (k[0]), coords: /** @type {number[]} */ (k[1]),
        flushedAt: /** @type {number} */ (k[2]), snapshotId: /** @type {string} */ (k[3]) };
      if (!timeline) {
        yield entry;
        continue;
      }
      const version = split(rec)[3];
      exceptions.set(JSON.stringify([k[0], k[1], k[3]]), [entry, version === 1 ? true : v[0] === true]);
      if (version !== 1 && typeof v[0] !== "boolean") throw new TypeError("chunk history value");
    }
    if (!timeline) return;
    const prefix = this.records(CHUNK_REF, key);
    for await (const [k] of prefix) {
      if (exceptions.has(JSON.stringify(k))) continue;
      const [nodeId2, at, sid] = /** @type {[string, number[], string]} */ (/** @type {unknown} */ (k));
      const value = await this.snapshotValue(sid);
      if (value === null) throw new ZSCorrupt(`${this.name}: a chunk ref record names snapshot ${sid}, which has no S record`);
      yield { nodeId: nodeId2, coords: at, flushedAt: value.flushedAt, snapshotId: sid };
    }
    for (const [entry, inLog] of exceptions.values()) if (inLog) yield entry;
  }

  /**
   * ``zs chunk-log REF PATH COORDS --json``: the commits in REF's history that changed that chunk, newest first.
   * @param {string} ref @param {string} path @param {number[] | string} coords
   */
  async chunkLog(ref, path, coords) {
    const at = chunkCoords(coords);
    const sid = await this.resolve(ref);
    const node = await this.nodeAt(sid, path, ref);
    const history = new Set();
    for await (const [id] of this.ancestry(sid)) history.add(id);
    const changes = [];
    for await (const entry of this.historyEntries(node.id, at)) changes.push(entry);
    changes.sort((a, b) => byTime(b, a));
    const out = [];
    for (const change of changes) {
      if (history.has(change.snapshotId)) {
        out.push(this.snapshotDict(change.snapshotId, /** @type {any} */ (await this.snapshotValue(change.snapshotId))));
      }
    }
    return out;
  }

  /**
   * What changed from FROM to TO (FROM must be in TO's history), as icechunk's ``diff`` says it.
   * @param {string} fromRef @param {string} toRef
   */
  async diffSets(fromRef, toRef) {
    const fromId = await this.resolve(fromRef), toId = await this.resolve(toRef);
    /** @type {Array<[string, import("./history.js").SnapshotValue]>} */
    const between = [];
    let found = false;
    for await (const [sid, value] of this.ancestry(toId)) {
      if (sid === fromId) {
        found = true;
        break;
      }
      between.push([sid, value]);
    }
    if (!found) {
      for await (const [sid] of this.ancestry(fromId)) {
        if (sid === toId) {
          throw new ZSError(`${this.name}: cannot diff: ${JSON.stringify(fromRef)} is not in the history of ` +
            `${JSON.stringify(toRef)}, but ${JSON.stringify(toRef)} is in the history of ${JSON.stringify(fromRef)}: swap them ` +
            `(FROM is the older: diff ${JSON.stringify(toRef)} ${JSON.stringify(fromRef)})`);
        }
      }
      throw new ZSError(`${this.name}: cannot diff: ${JSON.stringify(fromRef)} is not in the history of ${JSON.stringify(toRef)} ` +
        "(nor the reverse): FROM must be an ancestor of TO");
    }
    /** @type {Set<string>[]} */
    const sets = NODE_SETS.map(() => new Set());
    const chunkNodes = new Set();
    const moved = [];
    const changed = new Set();
    for (const [sid, value] of between) {
      if (value.parentId === null) continue;  // the initial snapshot: icechunk leaves its (empty) log out too
      changed.add(sid);
      const record = await this.one(TXLOG, [sid]);
      if (record === null) throw new ZSCorrupt(`${this.name}: snapshot ${sid} has no transaction log record`);
      const tx = txlog(record);
      if (tx.lostLogs.includes(sid)) {
        throw new ZSError(`${this.name}: cannot diff across snapshot ${sid}: its transaction log was no longer in the ` +
          "repository when it was archived");
      }
      tx.sets.forEach((ids, i) => ids.forEach((id) => sets[i].add(id)));
      for (const [nodeId] of tx.updatedChunks) chunkNodes.add(nodeId);
      for (const move of tx.moves) moved.push([move[0], move[1]]);
    }
    /** @type {Map<string, string>} */
    const paths = new Map();
    for (const snapshotId of [fromId, toId]) {
      for await (const [k, v] of this.records(NODE, [snapshotId])) paths.set(/** @type {string} */ (v[0]), pathOf(/** @type {string[]} */ (k[1])));
    }
    /** @type {Record<string, any>} */
    const out = {};
    NODE_SETS.forEach((name, i) => {
      out[name] = [...sets[i]].filter((id) => paths.has(id)).map((id) => /** @type {string} */ (paths.get(id))).sort(compareText);
    });
    /** @type {Map<string, number[][]>} */
    const updated = new Map();  // a path two nodes had: the later node's chunks, as a dict keeps them
    for (const nodeId of [...chunkNodes].sort(compareText)) {
      if (!paths.has(nodeId)) continue;
      const coords = new Map();
      for await (const change of this.historyEntries(nodeId)) {
        if (changed.has(change.snapshotId)) coords.set(JSON.stringify(change.coords), change.coords);
      }
      updated.set(/** @type {string} */ (paths.get(nodeId)), [...coords.values()].sort(compareCoords));
    }
    out.updated_chunks = [...updated].sort(([a], [b]) => compareText(a, b));
    out.moved_nodes = moved;
    return out;
  }

  /**
   * ``zs diff FROM TO --json`` rows (``stat``: ``zs diff --stat --json``, per array the chunks added, changed
   * and removed).
   * @param {string} fromRef @param {string} toRef @param {{stat?: boolean}} [options]
   */
  async diff(fromRef, toRef, options = {}) {
    const diff = await this.diffSets(fromRef, toRef);
    /** @type {Map<string, any>} */
    const nodes = new Map();
    const side = async (/** @type {number} */ which, /** @type {string} */ path, /** @type {number[]} */ coords) => {
      const key = `${which}:${path}`;
      if (!nodes.has(key)) {
        let node = null;
        try {
          node = await this.node(which ? toRef : fromRef, path);
        } catch (err) {
          if (!(err instanceof NotFound)) throw err;
        }
        nodes.set(key, node !== null && node.nodeType === "array" ? node : null);
      }
      const node = nodes.get(key);
      if (node === null) return null;
      const chunk = await this.arrayChunk(node, coords);
      return chunk === null ? null : chunkRow(chunk);
    };
    const rows = [];
    if (options.stat) {
      for (const [path, coordsList] of diff.updated_chunks) {
        const row = { path, added: 0, changed: 0, removed: 0 };
        for (const coords of coordsList) {
          const old = (await side(0, path, coords)) !== null, now = (await side(1, path, coords)) !== null;
          row[!old ? "added" : now ? "changed" : "removed"] += 1;
        }
        rows.push(row);
      }
      return rows;
    }
    for (const name of NODE_SETS) for (const path of diff[name]) rows.push({ change: name.slice(0, -1), path });
    for (const [path, coordsList] of diff.updated_chunks) {
      for (const coords of coordsList) {
        rows.push({ change: "updated_chunk", path, coords, from: await side(0, path, coords), to: await side(1, path, coords) });
      }
    }
    for (const [source, target] of diff.moved_nodes) rows.push({ change: "moved_node", path: target, from: source, to: target });
    return rows;
  }

  /**
   * ``zs ops --json``: ops-log entries updated in [since, until], newest first.
   * @param {{since?: string | number | Date | null, until?: string | number | Date | null}} [options]
   */
  async ops(options = {}) {
    const since = timeBound(options.since, false), until = timeBound(options.until, true);
    if (until !== null) {
      for await (const [k] of this.range(OPS, [], null)) {
        if (until < /** @type {number} */ (k[0])) {
          throw new NotFound(`${this.name}: ${formatTime(until)} is before the first operation (${formatTime(/** @type {number} */ (k[0]))})`);
        }
        break;
      }
    }
    const out = [];
    for await (const [k, v] of this.range(OPS, since === null ? [] : [since], until === null ? null : [until + 1])) {
      const updatedAt = /** @type {number} */ (k[0]);
      /** @type {Record<string, any>} */
      const entry = { type: v[0], updated_at: formatTime(updatedAt), backup_path: v[1] };
      Object.assign(entry, presentDetails(loadJson(/** @type {string} */ (v[2]), `${this.name}: archive ops record ${updatedAt}`)));
      out.push(entry);
    }
    return out.reverse();
  }
}

/**
 * Ops-log details as icechunk's ``ops_log()`` shows them: times as text, unset flags as null.
 * @param {any} details
 */
function presentDetails(details) {
  let status = details.status;
  if (status !== null && typeof status === "object" && !Array.isArray(status)) {
    status = { ...status };
    if (Number.isInteger(status.set_at)) status.set_at = formatTime(status.set_at);
    if (typeof status.availability === "string") status.availability = status.availability.replaceAll("-", "_");
    details.status = status;
  }
  if (details.is_set === false) details.new_value = null;
  return details;
}
