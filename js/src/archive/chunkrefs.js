// Where an archive keeps its chunk refs, by format version (docs/archive-format.rst, family C):
// format 1 per manifest, keyed (manifest_id, node_id, coords); format 2 on as a per-chunk timeline,
// keyed (node_id, coords, snapshot_id), resolved against the snapshot's history.
import { ZSCorrupt } from "../errors.js";
import { CHUNK_REF, REMOVED, keyPrefix, split } from "./schema.js";
import { same } from "./tuples.js";

/**
 * Coordinate tuples compared as Python compares tuples of integers.
 * @param {Array<number | bigint>} a @param {Array<number | bigint>} b
 */
export function compareCoords(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  }
  return a.length - b.length;
}

/** Chunk refs of a format 1 archive: stored once per manifest. */
export class ManifestRefs {
  /** @param {any} zs */
  constructor(zs) {
    this.zs = zs;
  }

  /**
   * The stored value of the chunk at ``coords``, or null.
   * @param {import("./nodes.js").NodeInfo} node @param {number[]} coords
   */
  async ref(node, coords) {
    for (const { manifestId, extents } of node.manifests ?? []) {
      if (coords.every((c, i) => i >= extents.length || (extents[i][0] <= c && c < extents[i][1]))) {
        for await (const rec of this.zs.search({ prefix: keyPrefix(CHUNK_REF, [manifestId, node.id, coords]) })) {
          const [, k, v] = split(rec);
          if (k.length === 3) return v;
        }
      }
    }
    return null;
  }

  /**
   * Every chunk with ``start <= coords < stop`` (when given), in coordinate order: [coords, value].
   * @param {import("./nodes.js").NodeInfo} node @param {number[] | null} start @param {number[] | null} stop
   * @returns {AsyncGenerator<[number[], any[]]>}
   */
  async *refs(node, start = null, stop = null) {
    const streams = (node.manifests ?? []).map(({ manifestId }) => {
      const prefix = [manifestId, node.id];
      return this.zs.search({
        start: start === null ? null : keyPrefix(CHUNK_REF, [...prefix, start]),
        stop: stop === null ? null : keyPrefix(CHUNK_REF, [...prefix, stop]),
        prefix: keyPrefix(CHUNK_REF, prefix),
      });
    });
    /** @type {Array<[number[], any[]] | null>} */
    const heads = [];
    const advance = async (/** @type {number} */ i) => {
      const { done, value } = await streams[i].next();
      if (done) {
        heads[i] = null;
        return;
      }
      const [, k, v] = split(value);
      heads[i] = [/** @type {number[]} */ (k[2]), v];
    };
    for (let i = 0; i < streams.length; i++) await advance(i);
    for (;;) {
      let best = -1;
      heads.forEach((head, i) => {
        if (head && (best < 0 || compareCoords(head[0], /** @type {any} */ (heads[best])[0]) < 0)) best = i;
      });
      if (best < 0) return;
      const item = /** @type {[number[], any[]]} */ (heads[best]);
      await advance(best);
      yield item;
    }
  }
}

/** Chunk refs of a format 2 archive on: each change stored once, resolved against a snapshot's history. */
export class RefTimeline {
  /**
   * @param {any} zs @param {(snapshotId: string) => Promise<Map<string, number>>} depths @param {string} name
   */
  constructor(zs, depths, name) {
    this.zs = zs;
    this.depths = depths;
    this.name = name;
  }

  /** @param {import("./nodes.js").NodeInfo} node @returns {Promise<[Map<string, number>, number]>} */
  async window(node) {
    const depths = await this.depths(node.snapshotId);
    const limit = depths.get(/** @type {string} */ (node.since));
    if (limit === undefined) {
      throw new ZSCorrupt(`${this.name}: array ${JSON.stringify(node.path)} at snapshot ${node.snapshotId} starts its chunk ` +
        `ref timeline at ${JSON.stringify(node.since)}, which is not in its history`);
    }
    return [depths, limit];
  }

  /**
   * The value of the nearest change in the history (null if none, or if it removed the ref).
   * @param {Array<[string, any[]]>} changes @param {Map<string, number>} depths @param {number} limit
   */
  static resolve(changes, depths, limit) {
    let best = limit + 1, found = null;
    for (const [snapshotId, value] of changes) {
      const depth = depths.get(snapshotId);
      if (depth !== undefined && depth < best) [best, found] = [depth, value];
    }
    return found === null || (found.length && found[0] === REMOVED) ? null : found;
  }

  /** @param {import("./nodes.js").NodeInfo} node @param {number[]} coords */
  async ref(node, coords) {
    const [depths, limit] = await this.window(node);
    const changes = [];
    for await (const rec of this.zs.search({ prefix: keyPrefix(CHUNK_REF, [node.id, coords]) })) {
      const [, k, v] = split(rec);
      if (k.length === 3) changes.push([/** @type {string} */ (k[2]), v]);
    }
    return RefTimeline.resolve(/** @type {any} */ (changes), depths, limit);
  }

  /**
   * @param {import("./nodes.js").NodeInfo} node @param {number[] | null} start @param {number[] | null} stop
   * @returns {AsyncGenerator<[number[], any[]]>}
   */
  async *refs(node, start = null, stop = null) {
    const [depths, limit] = await this.window(node);
    const records = this.zs.search({
      start: start === null ? null : keyPrefix(CHUNK_REF, [node.id, start]),
      stop: stop === null ? null : keyPrefix(CHUNK_REF, [node.id, stop]),
      prefix: keyPrefix(CHUNK_REF, [node.id]),
    });
    /** @type {any[] | null} */
    let coords = null;
    /** @type {Array<[string, any[]]>} */
    let group = [];
    for await (const rec of records) {
      const [, k, v] = split(rec);
      if (k.length !== 3) throw new TypeError(`chunk ref key of ${k.length} elements`);
      if (coords !== null && !same(k[1], coords)) {
        const value = RefTimeline.resolve(group, depths, limit);
        if (value !== null) yield [coords, value];
        group = [];
      }
      coords = /** @type {any[]} */ (k[1]);
      group.push([/** @type {string} */ (k[2]), v]);
    }
    if (coords !== null) {
      const value = RefTimeline.resolve(group, depths, limit);
      if (value !== null) yield [coords, value];
    }
  }
}
