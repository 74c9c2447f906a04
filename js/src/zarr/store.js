// A read-only zarrita store over one snapshot of a repo archive: the keys icechunk's own store serves
// (every node's zarr.json, each array's chunk keys), chunk bytes from the archive (inline, embedded) or
// from where the ref points (a native chunk of the repository at ``repo``, a virtual chunk under an
// authorized prefix, read on condition of its pins). It implements zarrita's AsyncReadable interface
// (``get``, ``getRange``), so ``zarr.open(store)`` reads any array of the snapshot.
import { ZSError } from "../errors.js";
import { ChunkKeys } from "./chunkkeys.js";
import { indexSpan, shardLayout } from "./shards.js";

const WINDOW_MIN = 1, WINDOW_MAX = 1024;

/**
 * The chunk refs of one array, read a window at a time: zarr asks for a selection's chunks in
 * coordinate order, the order the archive stores them in, so one scan along the last dimension answers
 * the next gets too; the window doubles while reads continue where it ends.
 */
class RefWindow {
  /** @param {import("../archive/repoarchive.js").RepoArchive} archive @param {import("../archive/nodes.js").NodeInfo} node */
  constructor(archive, node) {
    this.archive = archive;
    this.node = node;
    /** @type {{start: number[], stop: number[], refs: Map<string, any>, hits: number} | null} */
    this.window = null;
    this.size = WINDOW_MIN;
  }

  /** @param {number[]} coords */
  async get(coords) {
    const window = this.window;
    const key = coords.join(",");
    if (window) {
      const inside = coords.length && coords.slice(0, -1).every((c, i) => c === window.start[i]) &&
        coords[coords.length - 1] >= window.start[coords.length - 1] && coords[coords.length - 1] < window.stop[coords.length - 1];
      if (inside) {
        window.hits += 1;
        return window.refs.get(key) ?? null;
      }
      const last = coords.length - 1;
      if (coords.length && coords.slice(0, -1).every((c, i) => c === window.stop[i]) && coords[last] === window.stop[last]) {
        this.size = Math.min(2 * this.size, WINDOW_MAX);
      } else if (2 * window.hits < window.stop[last] - window.start[last]) {
        this.size = Math.max(this.size >> 1, WINDOW_MIN);
      }
    }
    if (!coords.length) return this.archive.arrayChunk(this.node, coords);
    const stop = [...coords.slice(0, -1), coords[coords.length - 1] + this.size];
    const refs = new Map();
    for await (const chunk of this.archive.arrayChunks(this.node, coords, stop)) refs.set(chunk.coords.join(","), chunk);
    this.window = { start: coords, stop, refs, hits: 0 };
    return refs.get(key) ?? null;
  }
}

/** One snapshot of a repo archive as a read-only zarrita store. */
export class ArchiveStore {
  /**
   * @param {import("../archive/repoarchive.js").RepoArchive} archive @param {string} ref
   * @param {string} snapshotId @param {import("../archive/nodes.js").NodeInfo[]} nodes @param {string | null} repo
   */
  constructor(archive, ref, snapshotId, nodes, repo) {
    this.archive = archive;
    this.ref = ref;
    this.snapshotId = snapshotId;
    this.repo = repo;
    this.where = ref === snapshotId ? ref : `${ref} (snapshot ${snapshotId})`;
    /** @type {Map<string, Uint8Array>} */
    this.meta = new Map();
    /** @type {Map<string, {keys: ChunkKeys, refs: RefWindow, layout: import("./shards.js").ShardLayout | null}>} */
    this.arrays = new Map();
    for (const node of nodes) {
      const path = node.path.replace(/^\/+|\/+$/g, "");
      this.meta.set(path ? `${path}/zarr.json` : "zarr.json", node.userData);
      if (node.nodeType === "array") {
        this.arrays.set(path, {
          keys: new ChunkKeys(node.path, node.zarrJson, /** @type {number[]} */ (node.numChunks), path ? `${path}/` : ""),
          refs: new RefWindow(archive, node), layout: shardLayout(node.zarrJson),
        });
      }
    }
  }

  /**
   * The array and chunk coordinates a key names, or null.
   * @param {string} key
   */
  locate(key) {
    let cut = key.length;
    for (;;) {
      cut = cut > 0 ? key.lastIndexOf("/", cut - 1) : -1;
      const array = this.arrays.get(cut > 0 ? key.slice(0, cut) : "");
      if (array) {
        const coords = array.keys.coords(key.slice(array.keys.base.length));
        if (coords !== null) return { array, coords };
      }
      if (cut <= 0) return null;
    }
  }

  /**
   * Bytes [start, stop) of the value at ``key`` (a range clipped to the value), or undefined.
   * @param {string} key @param {(size: number) => [number, number]} span
   */
  async read(key, span) {
    const name = key.replace(/^\//, "");
    const meta = this.meta.get(name);
    if (meta) {
      const [start, stop] = span(meta.length);
      return meta.slice(start, stop);
    }
    const located = this.locate(name);
    if (!located) return undefined;
    let chunk = await located.array.refs.get(located.coords);
    if (chunk === null) return undefined;
    const [start, stop] = span(chunk.length);
    if (chunk.kind === "inline") return chunk.inline.slice(start, stop);
    if (start !== 0 || stop !== chunk.length) {
      const layout = located.array.layout;
      if (layout) {
        const [lo, hi] = indexSpan(layout, chunk.length);
        if (lo === start && hi === stop) {
          const kept = await this.archive.shardIndex(chunk);
          if (kept && kept[0] === layout.atEnd && kept[1].length === layout.indexSize) return kept[1];  // no read of the shard
        }
      }
      // an inner chunk, or an index not kept
      chunk = { ...chunk, offset: chunk.offset + start, length: stop - start, refRange: chunk.refRange ?? [chunk.offset, chunk.length] };
    }
    return this.archive.readChunk(chunk, this.where, this.repo);
  }

  /** The value at ``key`` (``/zarr.json``, ``/path/c/0/1``), or undefined. @param {string} key */
  async get(key) {
    return this.read(key, (size) => [0, size]);
  }

  /**
   * A byte range of the value at ``key``: ``{offset, length}`` or ``{suffixLength}``.
   * @param {string} key @param {{offset: number, length: number} | {suffixLength: number}} range
   */
  async getRange(key, range) {
    return this.read(key, (size) => {
      const [start, stop] = "suffixLength" in range ? [size - range.suffixLength, size] : [range.offset, range.offset + range.length];
      const lo = Math.min(Math.max(start, 0), size);
      return [lo, Math.min(Math.max(stop, lo), size)];
    });
  }
}

/**
 * Open the snapshot REF names (branch, tag, snapshot id, REF@TIME) as a read-only zarrita store;
 * ``repo``: the repository's URL (in Node also a path), where native chunks the archive does not embed are.
 * @param {import("../archive/repoarchive.js").RepoArchive} archive @param {string} [ref]
 * @param {{repo?: string | null}} [options]
 */
export async function openStore(archive, ref = "main", options = {}) {
  if (!archive || typeof archive.resolve !== "function") throw new ZSError("openStore takes an archive from openArchive");
  const snapshotId = await archive.resolve(ref);
  const nodes = await archive.nodeInfos(`snapshot:${snapshotId}`);
  return new ArchiveStore(archive, ref, snapshotId, nodes, options.repo ?? null);
}
