// Queries of chunks: the ref at a coordinate at any snapshot, every ref of an array, their bytes, and
// the shard indexes an archive keeps.
import { NotFound, ZSCorrupt } from "../errors.js";
import { ChunkReader } from "./chunkdata.js";
import { ManifestRefs, RefTimeline } from "./chunkrefs.js";
import { hasChunkPieces, keepsVirtualData, refsByManifest } from "./header.js";
import { NodeQueries } from "./nodes.js";
import { readPieces, readVirtual } from "./pieces.js";
import { chunkCoords, coordsText } from "./refspec.js";
import { CHUNK_DATA, INLINE, KIND_NAMES, NATIVE, SHARD_INDEX, VIRTUAL, VIRTUAL_DATA } from "./schema.js";

/**
 * A chunk ref as ``zs chunk --json`` prints it (no inline bytes).
 * @param {import("./chunkdata.js").ChunkInfo} chunk
 */
export function chunkRow(chunk) {
  return {
    path: chunk.path, coords: chunk.coords, kind: chunk.kind, offset: chunk.offset, length: chunk.length,
    chunk_id: chunk.chunkId, location: chunk.location, checksum_etag: chunk.checksumEtag,
    checksum_last_modified: chunk.checksumLastModified,
  };
}

/** Chunk refs and chunk bytes. */
export class ChunkQueries extends NodeQueries {
  /**
   * @param {any} zs @param {string} name @param {number} formatVersion
   * @param {{authorize?: string[], fetch?: typeof fetch}} [options]
   */
  constructor(zs, name, formatVersion, options = {}) {
    super(zs, name, formatVersion);
    /** @type {boolean | null} */
    this.hasChunkData = null;
    /** @type {boolean | null} */
    this.hasShardIndexes = null;
    /** @type {boolean | null} */
    this.hasVirtualData = null;
    this.chunkReader = new ChunkReader(name, options.authorize ?? [], (id, start, stop) => this.embeddedChunk(id, start, stop),
      options.fetch, (key, start, stop) => this.embeddedVirtual(key, start, stop));
    this.refStore = refsByManifest(formatVersion) ? new ManifestRefs(zs)
      : new RefTimeline(zs, (sid) => this.historyDepths(sid), name);
  }

  /**
   * @param {string} path @param {number[]} coords @param {any[]} value
   * @returns {import("./chunkdata.js").ChunkInfo}
   */
  static chunkInfo(path, coords, value) {
    const kind = value[0];
    const base = { path, coords, chunkId: null, location: null, checksumEtag: null, checksumLastModified: null, inline: null };
    if (kind === INLINE) {
      if (!(value[1] instanceof Uint8Array)) throw new TypeError(`inline chunk ${coordsText(coords)} holds no bytes`);
      return { ...base, kind: "inline", offset: 0, length: value[1].length, inline: value[1] };
    }
    if (kind === NATIVE) {
      if (value.length < 4) throw new TypeError(`native chunk ref ${coordsText(coords)} has ${value.length} elements`);
      return { ...base, kind: "native", chunkId: value[1], offset: value[2], length: value[3] };
    }
    if (kind === VIRTUAL) {
      if (value.length < 6) throw new TypeError(`virtual chunk ref ${coordsText(coords)} has ${value.length} elements`);
      return { ...base, kind: "virtual", location: value[1], offset: value[2], length: value[3], checksumEtag: value[4],
        checksumLastModified: value[5] };
    }
    if (typeof kind === "number" && kind > KIND_NAMES.length) throw new ZSCorrupt(`chunk ref ${path} ${coordsText(coords)}: unknown kind ${kind}`);
    throw new TypeError(`chunk ref ${path} ${coordsText(coords)}: kind ${kind}`);
  }

  /**
   * The chunk ref at ``coords`` of the array at ``path`` in REF; NotFound if there is none.
   * @param {string} ref @param {string} path @param {number[] | string} coords
   */
  async chunkInfoAt(ref, path, coords) {
    const at = chunkCoords(coords);
    const node = await this.arrayAt(ref, path);
    const grid = /** @type {number[]} */ (node.numChunks);
    const dims = grid.length;
    if (at.length !== dims) {
      const given = `not ${at.length} (${coordsText(at)})`;
      const plural = dims !== 1 ? "s" : "";
      throw new NotFound(`${this.name}: ${JSON.stringify(node.path)} at ${JSON.stringify(ref)} ` + (dims
        ? `has ${dims} dimension${plural} and needs ${dims} coordinate${plural}, ${given}`
        : `is a scalar (0 dimensions) and needs no coordinates, ${given}`));
    }
    if (at.some((c, i) => !(c < grid[i]))) {
      throw new NotFound(`${this.name}: coords ${coordsText(at)} are outside the chunk grid ${coordsText(grid)} of ` +
        `${JSON.stringify(node.path)} at ${JSON.stringify(ref)}`);
    }
    const chunk = await this.arrayChunk(node, at);
    if (chunk !== null) return chunk;
    throw new NotFound(`${this.name}: no chunk at ${coordsText(at)} of ${JSON.stringify(node.path)} at ${JSON.stringify(ref)} ` +
      "(never written: it reads as the fill value)");
  }

  /**
   * ``zs chunk REF PATH COORDS --json``: a virtual ref of an archive that may keep virtual bytes (format 7)
   * says whether it does (``embedded``).
   * @param {string} ref @param {string} path @param {number[] | string} coords
   */
  async chunkRef(ref, path, coords) {
    const chunk = await this.chunkInfoAt(ref, path, coords);
    const row = chunkRow(chunk);
    if (chunk.kind === "virtual" && keepsVirtualData(this.recordsFormat)) return { ...row, embedded: await this.embeds(chunk) };
    return row;
  }

  /**
   * Whether the archive keeps a virtual ref's bytes itself.
   * @param {import("./chunkdata.js").ChunkInfo} chunk
   */
  async embeds(chunk) {
    const [whole, size] = chunk.refRange ?? [chunk.offset, chunk.length];
    const key = [chunk.location, whole, size, chunk.checksumEtag, chunk.checksumLastModified];
    return (await this.embeddedVirtual(key, chunk.offset, chunk.offset)) !== null;
  }

  /**
   * Bytes [start, stop) of a virtual range (``[location, offset, length, etag, last_modified]``) the archive
   * keeps, or null (archives before format 7 keep none: no lookup).
   * @param {any[]} key @param {number} start @param {number} stop
   */
  async embeddedVirtual(key, start, stop) {
    this.hasVirtualData ??= keepsVirtualData(this.recordsFormat) && await this.counted(VIRTUAL_DATA);
    if (!this.hasVirtualData) return null;
    return readVirtual(this.zs, key, start, stop);
  }

  /**
   * The chunk ref at ``coords`` of an array node; null if none.
   * @param {import("./nodes.js").NodeInfo} node @param {number[]} coords
   */
  async arrayChunk(node, coords) {
    const value = await this.refStore.ref(node, coords);
    return value === null ? null : ChunkQueries.chunkInfo(node.path, coords, value);
  }

  /**
   * Every chunk ref of an array node in coordinate order; only ``start <= coords < stop``, if given.
   * @param {import("./nodes.js").NodeInfo} node @param {number[] | null} [start] @param {number[] | null} [stop]
   * @returns {AsyncGenerator<import("./chunkdata.js").ChunkInfo>}
   */
  async *arrayChunks(node, start = null, stop = null) {
    for await (const [coords, value] of this.refStore.refs(node, start, stop)) yield ChunkQueries.chunkInfo(node.path, coords, value);
  }

  /**
   * ``zs chunks REF PATH --json``: every chunk ref of the array, streamed in coordinate order.
   * @param {string} ref @param {string} path
   * @returns {AsyncGenerator<ReturnType<typeof chunkRow>>}
   */
  async *chunkRefs(ref, path) {
    for await (const chunk of this.arrayChunks(await this.arrayAt(ref, path))) yield chunkRow(chunk);
  }

  /**
   * The bytes of a chunk ref (read at REF, for messages); ``repo``: the repository's URL (in Node also a
   * path) for native chunks the archive does not embed.
   * @param {import("./chunkdata.js").ChunkInfo} chunk @param {string} ref @param {string | null} [repo]
   */
  async readChunk(chunk, ref, repo = null) {
    return this.chunkReader.read(chunk, ref, repo);
  }

  /**
   * Bytes [start, stop) of the archive's copy of a native chunk file, if it embeds one.
   * @param {string} chunkId @param {number} start @param {number} stop
   */
  async embeddedChunk(chunkId, start, stop) {
    this.hasChunkData ??= await this.counted(CHUNK_DATA);
    if (!this.hasChunkData) return null;
    if (hasChunkPieces(this.formatVersion)) return readPieces(this.zs, chunkId, start, stop);
    const value = await this.one(CHUNK_DATA, [chunkId]);
    if (value === null) return null;
    const data = /** @type {Uint8Array} */ (value[0]);
    if (data.length < stop) throw new ZSCorrupt(`embedded chunk ${chunkId} is shorter than offset ${start} + length ${stop - start}`);
    return data.slice(start, stop);
  }

  /**
   * ``[at_end, raw index bytes]`` the archive keeps of a shard (a native or virtual chunk ref), or null.
   * @param {import("./chunkdata.js").ChunkInfo} chunk
   * @returns {Promise<[boolean, Uint8Array] | null>}
   */
  async shardIndex(chunk) {
    if (chunk.kind === "inline" || !hasChunkPieces(this.formatVersion)) return null;
    this.hasShardIndexes ??= await this.counted(SHARD_INDEX);
    if (!this.hasShardIndexes) return null;
    const key = chunk.kind === "native" ? [chunk.chunkId, chunk.offset, chunk.length]
      : [chunk.location, chunk.offset, chunk.length, chunk.checksumEtag, chunk.checksumLastModified];
    const value = await this.one(SHARD_INDEX, /** @type {any[]} */ (key));
    if (value === null) return null;
    if (value.length < 2 || typeof value[0] !== "boolean" || !(value[1] instanceof Uint8Array)) {
      throw new ZSCorrupt(`${this.name}: shard index record of ${key[0]} is malformed`);
    }
    return [value[0], value[1]];
  }
}
