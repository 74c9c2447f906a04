// Queries of an archive's history: refs, snapshots, resolving REF[@TIME], ancestry and the log.
import { NotFound, ZSCorrupt, ZSError } from "../errors.js";
import { ArchiveReader, loadJson } from "./reader.js";
import { parseRef, refReadings, timeBound, hint } from "./refspec.js";
import { REFS, SNAPSHOT, SNAPSHOT_TIME, keyPrefix, split } from "./schema.js";
import { formatTime } from "./times.js";
import { encode } from "./tuples.js";

const MIN_PREFIX = 4;  // the shortest snapshot id prefix a REF may give (git's minimum)
const AMBIGUOUS = 6;
const HISTORIES = 64;  // snapshot histories a reader keeps

/**
 * @typedef {{parentId: string | null, flushedAt: number, message: string, metadata: string, manifests: any[]}} SnapshotValue
 */

/**
 * ``start``, its parent, ... to the first null; at an id seen before, ``loop(id)`` is thrown, or the walk
 * ends when ``loop`` is null (parent links may loop in hostile input).
 * @param {string | null} start @param {(id: string) => string | null} parentOf
 * @param {((id: string) => Error) | null} loop
 * @returns {Generator<string>}
 */
export function* parentChain(start, parentOf, loop) {
  const seen = new Set();
  let current = start;
  while (current !== null && current !== undefined) {
    if (seen.has(current)) {
      if (loop === null) return;
      throw loop(current);
    }
    seen.add(current);
    yield current;
    current = parentOf(current);
  }
}

/** Refs and snapshots, and the walk from a snapshot through its parents (with a visited set). */
export class HistoryQueries extends ArchiveReader {
  /** @param {any} zs @param {string} name @param {number} formatVersion */
  constructor(zs, name, formatVersion) {
    super(zs, name, formatVersion);
    /** @type {Map<string, SnapshotValue>} */
    this.snapshots = new Map();
    /** @type {Map<string, Map<string, number>>} */
    this.depths = new Map();
  }

  /**
   * Branches, tags and deleted tags: ``{type, name, snapshot_id}`` (no id for deleted tags).
   * @returns {Promise<Array<{type: string, name: string, snapshot_id?: string}>>}
   */
  async refs() {
    const out = [];
    for await (const [key, value] of this.records(REFS)) {
      if (key.length !== 2 || typeof key[1] !== "string") throw new TypeError(`ref key ${JSON.stringify(key)}`);
      const [kind, name] = /** @type {[string, string]} */ (key);
      out.push(kind === "deleted_tag" ? { type: kind, name } : { type: kind, name, snapshot_id: /** @type {string} */ (value[0]) });
    }
    return out;
  }

  /** @param {string} snapshotId @returns {Promise<SnapshotValue | null>} */
  async snapshotValue(snapshotId) {
    let cached = this.snapshots.get(snapshotId);
    if (cached === undefined) {
      const value = await this.one(SNAPSHOT, [snapshotId]);
      if (value === null) return null;
      if (value.length < 5) throw new TypeError(`snapshot record of ${snapshotId} has ${value.length} elements`);
      cached = {
        parentId: /** @type {any} */ (value[0]), flushedAt: /** @type {any} */ (value[1]),
        message: /** @type {any} */ (value[2]), metadata: /** @type {any} */ (value[3]), manifests: /** @type {any} */ (value[4]),
      };
      this.snapshots.set(snapshotId, cached);
    }
    return cached;
  }

  /**
   * A snapshot as the log shows it: id, parent_id, flushed_at, message, metadata.
   * @param {string} snapshotId @param {SnapshotValue} value
   */
  snapshotDict(snapshotId, value) {
    if (typeof value.message !== "string") throw new TypeError(`snapshot ${snapshotId}: message is not text`);
    return {
      id: snapshotId, parent_id: value.parentId, flushed_at: formatTime(value.flushedAt), message: value.message,
      metadata: loadJson(value.metadata, `archive snapshots record ${snapshotId}`),
    };
  }

  /** One snapshot: id, parent_id, flushed_at, message, metadata, manifests. @param {string} snapshotId */
  async snapshot(snapshotId) {
    const value = await this.snapshotValue(snapshotId);
    if (value === null) throw new NotFound(`${this.name}: no snapshot ${JSON.stringify(snapshotId)}`);
    return {
      ...this.snapshotDict(snapshotId, value),
      manifests: value.manifests.map(([id, size, n]) => ({ id, size_bytes: size, num_chunk_refs: n })),
    };
  }

  /**
   * @param {import("./refspec.js").RefSpec} spec @param {boolean} quiet
   * @returns {Promise<string | null>}
   */
  async lookupRef(spec, quiet = false) {
    const kinds = spec.kind ? [spec.kind] : ["branch", "tag", "snapshot"];
    for (const kind of kinds) {
      if (kind === "snapshot") {
        const found = await this.snapshotIdLike(spec.name, quiet);
        if (found !== null) return found;
        continue;
      }
      const value = await this.one(REFS, [kind, spec.name]);
      if (value !== null) return /** @type {string} */ (value[0]);
    }
    if (quiet) return null;
    if ((spec.kind === null || spec.kind === "tag") && (await this.one(REFS, ["deleted_tag", spec.name])) !== null) {
      throw new NotFound(`${this.name}: tag ${JSON.stringify(spec.name)} was deleted`);
    }
    const what = spec.kind ? `${spec.kind} ` : "branch, tag or snapshot ";
    const types = spec.kind ? [spec.kind] : ["branch", "tag"];
    const names = (await this.refs()).filter((r) => types.includes(r.type)).map((r) => r.name);
    const noun = { branch: "branches", tag: "tags" }[spec.kind ?? ""] ?? "branches and tags";
    throw new NotFound(`${this.name}: unknown ${what}${JSON.stringify(spec.name)}${hint(names, noun)}`);
  }

  /**
   * The snapshot whose id is ``text`` in any case, or the one id it is a prefix of (at least 4
   * characters); null if none, an error if several.
   * @param {string} text @param {boolean} quiet
   */
  async snapshotIdLike(text, quiet) {
    for (const candidate of new Set([text, text.toUpperCase()])) {
      if ((await this.snapshotValue(candidate)) !== null) return candidate;
    }
    if (text.length < MIN_PREFIX) return null;
    const encoded = encode([text.toUpperCase()]);
    const prefix = new Uint8Array(encoded.length);  // the text without its END byte, after the family tag
    prefix.set(keyPrefix(SNAPSHOT));
    prefix.set(encoded.subarray(0, encoded.length - 1), 1);
    const ids = [];
    for await (const rec of this.zs.search({ prefix })) {
      ids.push(/** @type {string} */ (split(rec)[1][0]));
      if (ids.length >= AMBIGUOUS) break;
    }
    if (ids.length > 1 && !quiet) {
      const shown = ids.slice(0, AMBIGUOUS - 1).join(", ") + (ids.length === AMBIGUOUS ? " ..." : "");
      throw new NotFound(`${this.name}: snapshot id prefix ${JSON.stringify(text)} is ambiguous: ${shown}; give more characters`);
    }
    return ids.length === 1 ? ids[0] : null;
  }

  /**
   * Snapshot id a REF names: ``[branch:|tag:|snapshot:]NAME`` followed by any of ``~N``, ``^`` and ``@TIME``,
   * applied left to right (``main~3``, ``tag:v1.0^``, ``main@2026-11-22T01:19:29Z~2``).
   * @param {string} ref
   */
  async resolve(ref) {
    if (typeof ref !== "string") throw new ZSError(`REF must be text, not ${typeof ref}`);
    const readings = refReadings(ref);
    let spec = null;
    for (const [name, suffixes] of readings.slice(0, -1)) {  // a name holding ~, ^ or @ wins over suffixes
      if ((await this.lookupRef(bare(name), true)) !== null) {
        spec = parseRef(ref, suffixes);
        break;
      }
    }
    spec ??= parseRef(ref, readings[readings.length - 1][1]);
    let snapshotId = /** @type {string} */ (await this.lookupRef(spec));
    let at = spec.kind ? `${spec.kind}:${spec.name}` : spec.name;
    for (const [op, arg] of spec.steps) {
      snapshotId = op === "~" ? await this.parentsBack(snapshotId, arg, at) : await this.asOf(snapshotId, arg, at);
      at += op === "~" ? `~${arg}` : `@${formatTime(arg)}`;
    }
    return snapshotId;
  }

  /**
   * The snapshot ``count`` parents before ``snapshotId`` (named ``at`` in messages).
   * @param {string} snapshotId @param {number} count @param {string} at
   */
  async parentsBack(snapshotId, count, at) {
    let depth = 0;
    for await (const [sid, value] of this.ancestry(snapshotId)) {
      if (depth === count) return sid;
      if (value.parentId !== null && (await this.snapshotValue(value.parentId)) === null) {
        throw new NotFound(`${this.name}: ${at}~${count} is beyond the archived history: ${at}~${depth} (${sid}) names ` +
          `parent ${value.parentId}, which the archive does not hold`);
      }
      depth += 1;
    }
    depth -= 1;
    throw new NotFound(`${this.name}: ${at}~${count} is beyond the first commit: the history of ${at} holds ${depth + 1} ` +
      `snapshot${depth ? "s" : ""} (${at}~${depth} is its first)`);
  }

  /**
   * The newest snapshot in the history of ``snapshotId`` flushed at or before ``when``.
   * @param {string} snapshotId @param {number} when @param {string} at
   */
  async asOf(snapshotId, when, at) {
    let first = null;
    for await (const [sid, value] of this.ancestry(snapshotId)) {
      if (value.flushedAt <= when) return sid;
      first = value.flushedAt;
    }
    throw new NotFound(`${this.name}: no snapshot in the history of ${JSON.stringify(at)} was flushed at or before ` +
      `${formatTime(when)} (its first commit was flushed at ${first === null ? "-" : formatTime(first)})`);
  }

  /**
   * The snapshot and its ancestors, newest first, with their records; ZSCorrupt on a loop or a missing record.
   * @param {string} snapshotId
   * @returns {AsyncGenerator<[string, SnapshotValue]>}
   */
  async *ancestry(snapshotId) {
    /** @type {Map<string, SnapshotValue>} */
    const values = new Map();
    const walk = parentChain(snapshotId, (sid) => /** @type {SnapshotValue} */ (values.get(sid)).parentId,
      (at) => new ZSCorrupt(`${this.name}: the history of snapshot ${snapshotId} loops at snapshot ${at}`));
    for (const current of walk) {
      const value = await this.snapshotValue(current);
      if (value === null) throw new ZSCorrupt(`${this.name}: snapshot ${current} is in a history but has no record`);
      values.set(current, value);
      yield [current, value];
    }
  }

  /**
   * Every snapshot in the history of one -> its distance from it (0: itself); the history ends at the
   * first snapshot without a parent, or whose parent the archive does not hold.
   * @param {string} snapshotId
   * @returns {Promise<Map<string, number>>}
   */
  async historyDepths(snapshotId) {
    let depths = this.depths.get(snapshotId);
    if (depths === undefined) {
      depths = new Map();
      /** @type {Map<string, SnapshotValue>} */
      const values = new Map();
      for (const current of parentChain(snapshotId, (sid) => /** @type {SnapshotValue} */ (values.get(sid)).parentId, null)) {
        const value = await this.snapshotValue(current);
        if (value === null) break;
        values.set(current, value);
        depths.set(current, depths.size);
      }
      this.depths.set(snapshotId, depths);
      while (this.depths.size > HISTORIES) this.depths.delete(/** @type {string} */ (this.depths.keys().next().value));
    }
    return depths;
  }

  /** The history of REF, newest first. @param {string} ref */
  async ancestryOf(ref) {
    const out = [];
    for await (const [sid, value] of this.ancestry(await this.resolve(ref))) out.push(this.snapshotDict(sid, value));
    return out;
  }

  /** Snapshot id -> the refs whose history holds it (branches by name, tags as ``tag:NAME``). */
  async reachedBy() {
    /** @type {Map<string, string[]>} */
    const out = new Map();
    for (const ref of await this.refs()) {
      if (ref.type === "deleted_tag") continue;
      const name = ref.type === "branch" ? ref.name : `tag:${ref.name}`;
      for (const sid of (await this.historyDepths(ref.snapshot_id)).keys()) {
        if (!out.has(sid)) out.set(sid, []);
        /** @type {string[]} */ (out.get(sid)).push(name);
      }
    }
    return out;
  }

  /**
   * Snapshots (of REF's history, or all) flushed in [since, until], newest first, at most ``maxCount``;
   * ``zs log --json``: without REF each with ``refs``, the branches and tags whose history holds it (unless
   * ``refs`` is false: RepoArchive.log's rows, as zs serve's page asks for them).
   * @param {string | null} [ref]
   * @param {{since?: string | number | Date | null, until?: string | number | Date | null, maxCount?: number | null,
   *   refs?: boolean}} [options]
   */
  async log(ref = null, options = {}) {
    const { maxCount = null } = options;
    if (maxCount !== null && !(Number.isInteger(maxCount) && maxCount >= 0)) {
      throw new ZSError(`maxCount must be an integer >= 0, not ${maxCount}`);
    }
    const since = timeBound(options.since, false), until = timeBound(options.until, true);
    /** @type {Array<[string, any]>} */
    let chosen;
    /** @type {number | null} */
    let earliest = null;
    if (ref !== null && ref !== undefined) {
      const items = [];
      for await (const item of this.ancestry(await this.resolve(ref))) items.push(item);
      for (const [, v] of items) if (earliest === null || v.flushedAt < earliest) earliest = v.flushedAt;
      chosen = items.filter(([, v]) => (since === null || v.flushedAt >= since) && (until === null || v.flushedAt <= until));
      chosen.sort(([, a], [, b]) => b.flushedAt - a.flushedAt);
    } else {
      for await (const [k] of this.range(SNAPSHOT_TIME, [], null)) {
        earliest = /** @type {number} */ (k[0]);
        break;
      }
      const window = [];
      for await (const [k] of this.range(SNAPSHOT_TIME, since === null ? [] : [since], until === null ? null : [until + 1])) {
        window.push(/** @type {string} */ (k[1]));
      }
      chosen = [];
      for (const sid of window.reverse()) chosen.push([sid, await this.snapshotValue(sid)]);
    }
    if (until !== null && earliest !== null && until < /** @type {number} */ (earliest)) {
      throw new NotFound(`${this.name}: ${formatTime(until)} is before the first commit (${formatTime(earliest)})`);
    }
    const rows = chosen.slice(0, maxCount ?? undefined).map(([sid, value]) => this.snapshotDict(sid, value));
    if ((ref === null || ref === undefined) && options.refs !== false) {
      const reached = await this.reachedBy();
      for (const row of rows) /** @type {any} */ (row).refs = reached.get(row.id) ?? [];
    }
    return rows;
  }
}

/**
 * A NAME without suffixes, for a lookup that may fail quietly (a bad name is then no ref).
 * @param {string} name
 * @returns {import("./refspec.js").RefSpec}
 */
function bare(name) {
  try {
    return parseRef(name, "");
  } catch (err) {
    if (!(err instanceof ZSError)) throw err;
    return { kind: null, name, text: name, steps: [] };
  }
}
