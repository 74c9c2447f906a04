// ``ZS``: a ZS file opened for reading over any transport, as zsarchive's Python reader reads it.
//
// Opening is one round trip: the head and the tail of the file, asked for together; the tail holds the
// root index (writers put it last). A lookup descends cached index blocks and bisects cached, parsed
// data blocks; a scan streams runs of adjacent data blocks, one request each, the next run fetched while
// the current one is decoded. Every block read is checked against its CRC-64 before it is used.
import { ZSCorrupt } from "../errors.js";
import { DATA_BLOCK_CACHE, INDEX_BLOCK_CACHE, MAX_BLOCK, MAX_FRAMED_BLOCK } from "../limits.js";
import { openTransport } from "../io/transport.js";
import { MAX_INDEX_LEVEL, MIN_BLOCK_LENGTH, compareBytes, decodeIndex, recordSpans, splitBlock } from "./block.js";
import { LRUCache } from "./cache.js";
import { decoderFor } from "./codecs.js";
import { headerEnd, parseHeader, PREFIX_LENGTH } from "./header.js";

/** Bytes fetched from the start and from the end at open. */
const HEAD_GUESS = 64 * 1024;
const TAIL_GUESS = 64 * 1024;
/** Most index blocks of one level a scan fetches in one batch (batches double from 1). */
const INDEX_BATCH = 64;
const INDEX_BATCH_BYTES = 2 ** 20;
/** Searches touching at most this many data blocks go through the data block cache. */
const SMALL_SPAN_BLOCKS = 2;
/** A scan's first read is small (a quick first record); later runs double up to RUN_BYTES. */
const FIRST_RUN_BYTES = 256 * 1024;
const RUN_BYTES = 4 * 2 ** 20;
/** Index blocks between data blocks up to this size are read through rather than split a run. */
const GAP_BYTES = 64 * 1024;

/**
 * @typedef {{offset: number, length: number, key: Uint8Array}} DataExtent
 * @typedef {import("./block.js").IndexBlock} IndexBlock
 */

/**
 * Index of the first item of ``keys`` (sorted) that is >= ``key``.
 * @param {Uint8Array[]} keys @param {Uint8Array} key
 */
function bisectLeft(keys, key) {
  let lo = 0, hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (compareBytes(keys[mid], key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** A decompressed data payload and where its records are: bisectable without splitting it. */
export class DataBlock {
  /** @param {Uint8Array} payload @param {string} where */
  constructor(payload, where) {
    this.payload = payload;
    const { starts, ends } = recordSpans(payload, where);
    this.starts = starts;
    this.ends = ends;
    this.count = starts.length;
  }

  /** @param {number} i */
  record(i) {
    return this.payload.subarray(this.starts[i], this.ends[i]);
  }

  /** Records ``lo`` up to ``hi``. @param {number} lo @param {number} hi */
  records(lo, hi) {
    const out = new Array(hi - lo);
    for (let i = lo; i < hi; i++) out[i - lo] = this.record(i);
    return out;
  }

  /** Index of the first record >= ``key``. @param {Uint8Array} key */
  bisect(key) {
    let lo = 0, hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (compareBytes(this.record(mid), key) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  weight() {
    return this.payload.length + 8 * this.count + 200;
  }
}

/**
 * The smallest byte string greater than every string starting with ``prefix`` (null: none, all 0xff).
 * @param {Uint8Array} prefix
 */
export function prefixStop(prefix) {
  let end = prefix.length;
  while (end > 0 && prefix[end - 1] === 0xff) end--;
  if (!end) return null;
  const stop = prefix.slice(0, end);
  stop[end - 1] += 1;
  return stop;
}

/** A ZS file opened for reading: ``await ZS.open(urlOrPathOrBlob)``. */
export class ZS {
  /**
   * @param {import("../io/transport.js").Transport} transport
   * @param {import("./header.js").Header} header
   * @param {number} blocksStart
   */
  constructor(transport, header, blocksStart) {
    this.transport = transport;
    this.name = transport.name;
    this.metadata = header.metadata;
    this.codec = header.codec;
    this.dataSha256 = header.dataSha256;
    this.rootIndexOffset = header.rootIndexOffset;
    this.rootIndexLength = header.rootIndexLength;
    this.totalFileLength = header.totalFileLength;
    this.headerExtensions = header.extensions;
    this.blocksStart = blocksStart;
    this.decompress = decoderFor(header.codec, this.name);
    this.indexCache = new LRUCache(INDEX_BLOCK_CACHE);
    this.dataCache = new LRUCache(DATA_BLOCK_CACHE);
    /** @type {Map<string, Promise<DataBlock>>} */
    this.loading = new Map();
    this.stats = { blockReads: 0, decompressions: 0, indexCacheHits: 0, dataCacheHits: 0 };
    /** @type {IndexBlock} */
    this.root = /** @type {any} */ (null);
  }

  /**
   * Open a ZS file: a URL, a File or Blob, a transport, or in Node a path.
   * @param {string | Blob | URL | import("../io/transport.js").Transport} source
   * @param {object} [options] for the transport of a URL
   * @returns {Promise<ZS>}
   */
  static async open(source, options) {
    const transport = typeof source === "object" && source !== null && "readHeadTail" in source
      ? /** @type {import("../io/transport.js").Transport} */ (source) : await openTransport(/** @type {any} */ (source), options);
    try {
      let [head, tail] = await transport.readHeadTail(HEAD_GUESS, TAIL_GUESS);
      const size = transport.size;
      const end = headerEnd(head.subarray(0, PREFIX_LENGTH), size, transport.name);
      if (end > head.length) head = await transport.read(0, end);
      const [header, blocksStart] = parseHeader(head, size, transport.name);
      const zs = new ZS(transport, header, blocksStart);
      const tailStart = size - tail.length;
      const { rootIndexOffset: offset, rootIndexLength: length } = header;
      const buf = offset >= tailStart ? tail.subarray(offset - tailStart, offset - tailStart + length)
        : await transport.read(offset, length);
      zs.stats.blockReads += 1;
      zs.root = await zs.parseIndex(buf, offset, null);
      return zs;
    } catch (err) {
      await transport.close?.();
      throw err;
    }
  }

  get rootIndexLevel() {
    return this.root.level;
  }

  async close() {
    this.dataCache.clear();
    this.indexCache.clear();
    await this.transport.close?.();
  }

  // ---- blocks ------------------------------------------------------------------------------

  /**
   * Check one framed block (CRC, expected level) and return its decompressed payload.
   * @param {Uint8Array} buf @param {number} offset @param {number} level @param {string} kind
   */
  async payload(buf, offset, level, kind) {
    const where = `${this.name}: block at offset ${offset}`;
    const [found, zpayload] = splitBlock(buf, where);
    if (found !== level) throw new ZSCorrupt(`${where}: expected ${kind} (level ${level}), found a block of level ${found}`);
    this.stats.decompressions += 1;
    return this.decompress(zpayload, where);
  }

  /**
   * An index block of ``level`` (null: the root, of any index level) from its framed bytes.
   * @param {Uint8Array} buf @param {number} offset @param {number | null} level
   * @returns {Promise<IndexBlock>}
   */
  async parseIndex(buf, offset, level) {
    const where = `${this.name}: block at offset ${offset}`;
    if (level === null) {
      level = splitBlock(buf, where)[0];
      if (!(level >= 1 && level <= MAX_INDEX_LEVEL)) {
        throw new ZSCorrupt(`${where}: the root must be an index block (level 1-${MAX_INDEX_LEVEL}), found level ${level}`);
      }
    }
    const block = decodeIndex(await this.payload(buf, offset, level, "an index block"), level, where);
    const lo = this.blocksStart, hi = this.totalFileLength;
    block.offsets.forEach((o, i) => {
      const n = block.lengths[i];
      if (o < lo || n < MIN_BLOCK_LENGTH || o + n > hi) {
        throw new ZSCorrupt(`${where}: index entry ${i} points at offset ${o} length ${n}, outside the blocks ` +
          `area [${lo}, ${hi})`);
      }
      if (n > MAX_FRAMED_BLOCK) {
        throw new ZSCorrupt(`${where}: index entry ${i} points at a block of ${n} bytes: no block that decodes ` +
          `within the ceiling of ${MAX_BLOCK} bytes is that long`);
      }
    });
    return block;
  }

  /**
   * The index blocks at ``extents`` (all of ``level``): cached ones, the rest in one batch of requests.
   * @param {Array<[number, number]>} extents @param {number} level
   * @returns {Promise<IndexBlock[]>}
   */
  async indexBlocks(extents, level) {
    const blocks = extents.map(([o, n]) => /** @type {IndexBlock | undefined} */ (this.indexCache.get(`${o}:${n}:${level}`)));
    const missing = [];
    blocks.forEach((block, i) => {
      if (block) this.stats.indexCacheHits += 1;
      else missing.push(i);
    });
    if (missing.length) {
      const bufs = await this.transport.readRanges(missing.map((i) => extents[i]));
      this.stats.blockReads += missing.length;
      for (let k = 0; k < missing.length; k++) {
        const i = missing[k];
        const [offset, length] = extents[i];
        const block = await this.parseIndex(bufs[k], offset, level);
        this.indexCache.put(`${offset}:${length}:${level}`, block);
        blocks[i] = block;
      }
    }
    return /** @type {IndexBlock[]} */ (blocks);
  }

  /** One parsed data block, through the byte-bounded cache (lookups). @param {DataExtent} ext */
  async dataBlock(ext) {
    const key = `${ext.offset}:${ext.length}`;
    const cached = /** @type {DataBlock | undefined} */ (this.dataCache.get(key));
    if (cached) {
      this.stats.dataCacheHits += 1;
      return cached;
    }
    let loading = this.loading.get(key);  // concurrent lookups of one block share its read
    if (!loading) {
      loading = (async () => {
        const buf = await this.transport.read(ext.offset, ext.length);
        this.stats.blockReads += 1;
        return new DataBlock(await this.payload(buf, ext.offset, 0, "a data block"), `${this.name}: block at offset ${ext.offset}`);
      })();
      this.loading.set(key, loading);
    }
    try {
      const block = await loading;
      this.dataCache.put(key, block, block.weight());
      return block;
    } finally {
      this.loading.delete(key);
    }
  }

  // ---- navigation --------------------------------------------------------------------------

  /**
   * The data blocks that may hold records in [start, stop) (stop null: no end), in file order.
   * Index entries must form a tree over data blocks in file order: an index block reached twice, or a
   * data block at or before the previous one, is ZSCorrupt (this bounds every walk by the file's size).
   * @param {Uint8Array} start @param {Uint8Array | null} stop
   * @returns {AsyncGenerator<DataExtent>}
   */
  async *extents(start, stop) {
    const seen = new Set([this.rootIndexOffset]);
    const visit = (/** @type {number} */ offset) => {
      if (seen.has(offset)) {
        throw new ZSCorrupt(`${this.name}: the index block at offset ${offset} is reached twice (index blocks must form a tree)`);
      }
      seen.add(offset);
    };
    /** @type {Array<[IndexBlock, number]>} */
    const path = [];
    let block = this.root;
    for (;;) {
      const i = Math.max(bisectLeft(block.keys, start) - 1, 0);
      path.push([block, i]);
      if (block.level === 1) break;
      visit(block.offsets[i]);
      block = (await this.indexBlocks([[block.offsets[i], block.lengths[i]]], block.level - 1))[0];
    }
    let entries = entriesOf(path[0][0], path[0][1], stop);
    for (const [child, i] of path.slice(1)) {
      if ((await entries.next()).done) return;  // the descended child's key is >= stop: nothing in range
      entries = chained(entriesOf(child, i, stop), this.children(entries, child.level, stop, visit));
    }
    let previous = -1;
    for await (const [key, offset, length] of entries) {
      if (offset <= previous) {
        throw new ZSCorrupt(`${this.name}: the index points at the data block at offset ${offset} after the one at ` +
          `offset ${previous} (data blocks must follow in file order, each once)`);
      }
      previous = offset;
      yield { offset, length, key };
    }
  }

  /**
   * Entries of the level-``level`` index blocks that ``parents`` point at, in order, fetched in batches
   * that double from one block up to INDEX_BATCH blocks or INDEX_BATCH_BYTES.
   * @param {AsyncGenerator<[Uint8Array, number, number]>} parents @param {number} level
   * @param {Uint8Array | null} stop @param {(offset: number) => void} visit
   * @returns {AsyncGenerator<[Uint8Array, number, number]>}
   */
  async *children(parents, level, stop, visit) {
    let size = 1;
    for (;;) {
      const batch = [];
      let total = 0;
      for (;;) {
        const { done, value } = await parents.next();
        if (done) break;
        visit(value[1]);
        batch.push(value);
        total += value[2];
        if (batch.length >= size || total >= INDEX_BATCH_BYTES) break;
      }
      if (!batch.length) return;
      for (const block of await this.indexBlocks(batch.map(([, o, n]) => [o, n]), level)) {
        yield* entriesOf(block, 0, stop);
      }
      size = Math.min(2 * size, INDEX_BATCH);
    }
  }

  // ---- queries -----------------------------------------------------------------------------

  /**
   * Records ``start <= r < stop`` that start with ``prefix``, in sorted order.
   * @param {{start?: Uint8Array | null, stop?: Uint8Array | null, prefix?: Uint8Array | null}} [bounds]
   * @returns {AsyncGenerator<Uint8Array>}
   */
  async *search(bounds = {}) {
    for await (const batch of this.searchBatches(bounds)) yield* batch;
  }

  /**
   * The records of ``search``, a data block's worth at a time (no await per record: for scans of millions).
   * @param {{start?: Uint8Array | null, stop?: Uint8Array | null, prefix?: Uint8Array | null}} [bounds]
   * @returns {AsyncGenerator<Uint8Array[]>}
   */
  async *searchBatches(bounds = {}) {
    for await (const { block, lo, hi } of this.searchSpans(bounds)) yield block.records(lo, hi);
  }

  /**
   * The records of ``search`` as spans of parsed blocks: record ``i`` of ``block`` for ``lo <= i < hi``, read
   * from ``block.payload`` between ``block.starts[i]`` and ``block.ends[i]`` (no object per record).
   * @param {{start?: Uint8Array | null, stop?: Uint8Array | null, prefix?: Uint8Array | null}} [bounds]
   * @returns {AsyncGenerator<{block: DataBlock, lo: number, hi: number}>}
   */
  async *searchSpans(bounds = {}) {
    const [start, stop] = span(bounds);
    if (stop && compareBytes(stop, start) <= 0) return;
    const extents = this.extents(start, stop);
    const first = [];
    while (first.length <= SMALL_SPAN_BLOCKS) {
      const { done, value } = await extents.next();
      if (done) break;
      first.push(value);
    }
    if (first.length <= SMALL_SPAN_BLOCKS) {
      // a lookup-sized query: cached, parsed blocks make a repeat a pure bisect
      for (const ext of first) {
        const block = await this.dataBlock(ext);
        const lo = compareBytes(ext.key, start) < 0 ? block.bisect(start) : 0;
        const hi = stop ? block.bisect(stop) : block.count;
        if (hi > lo) yield { block, lo, hi };
      }
      return;
    }
    for await (const [ext, payload] of this.scan(chained(listed(first), extents))) {
      const block = new DataBlock(payload, `${this.name}: block at offset ${ext.offset}`);
      const lo = compareBytes(ext.key, start) < 0 ? block.bisect(start) : 0;
      const hi = stop ? block.bisect(stop) : block.count;
      if (hi > lo) yield { block, lo, hi };
      if (hi < block.count) return;
    }
  }

  /**
   * The payloads of data blocks in file order: runs of nearby blocks one request each (runs double from
   * FIRST_RUN_BYTES up to RUN_BYTES), the next run fetched while the current one is decoded; no cache
   * (a scan would only evict what lookups need).
   * @param {AsyncGenerator<DataExtent>} extents
   * @returns {AsyncGenerator<[DataExtent, Uint8Array]>}
   */
  async *scan(extents) {
    let limit = FIRST_RUN_BYTES;
    /** @type {DataExtent[]} */
    let run = [];
    /** @type {DataExtent | null} */
    let carried = null;
    const nextRun = async () => {
      run = carried ? [carried] : [];
      carried = null;
      for (;;) {
        const { done, value } = await extents.next();
        if (done) break;
        if (run.length) {
          const end = run[run.length - 1].offset + run[run.length - 1].length;
          if (!(end <= value.offset && value.offset <= end + GAP_BYTES) || value.offset + value.length - run[0].offset > limit) {
            carried = value;
            limit = Math.min(2 * limit, RUN_BYTES);
            break;
          }
        }
        run.push(value);
      }
      if (!run.length) return null;
      const taken = run;
      const start = taken[0].offset, last = taken[taken.length - 1];
      const bytes = this.transport.read(start, last.offset + last.length - start);
      return { taken, start, bytes };
    };
    let pending = await nextRun();
    while (pending) {
      const { taken, start, bytes } = pending;
      const buf = await bytes;
      this.stats.blockReads += taken.length;
      pending = await nextRun();  // its bytes arrive while these blocks decode
      for (const ext of taken) {  // one at a time: a block may decode to 64 MiB, a run holds hundreds
        const at = ext.offset - start;
        yield [ext, await this.payload(buf.subarray(at, at + ext.length), ext.offset, 0, "a data block")];
      }
    }
  }

  /**
   * The last record < ``before`` (if the block a lookup of ``before`` lands on holds one) and every record
   * in [before, stop), their blocks read together.
   * @param {Uint8Array} before @param {Uint8Array} stop
   * @returns {Promise<Uint8Array[]>}
   */
  async floorSpan(before, stop) {
    if (compareBytes(stop, before) <= 0) return [];
    const extents = [];
    for await (const ext of this.extents(before, stop)) extents.push(ext);
    if (!extents.length) return [];
    const found = [];
    if (extents.length === 1) {
      const block = await this.dataBlock(extents[0]);
      for (let i = 0; i < block.count; i++) found.push(block.record(i));
    } else {
      const bufs = await this.transport.readRanges(extents.map((e) => [e.offset, e.length]));
      this.stats.blockReads += extents.length;
      for (let k = 0; k < extents.length; k++) {
        const payload = await this.payload(bufs[k], extents[k].offset, 0, "a data block");
        const block = new DataBlock(payload, `${this.name}: block at offset ${extents[k].offset}`);
        for (let i = 0; i < block.count; i++) found.push(block.record(i));
      }
    }
    const lo = bisectLeft(found, before), hi = bisectLeft(found, stop);
    return found.slice(Math.max(lo - 1, 0), hi);
  }

  /**
   * Bytes of the data blocks (framing included) whose index key lies in [start, stop): read from the
   * index alone.
   * @param {Uint8Array} start @param {Uint8Array | null} stop
   */
  async blockBytes(start, stop) {
    let total = 0;
    for await (const ext of this.extents(start, stop)) {
      if (compareBytes(ext.key, start) >= 0) total += ext.length;
    }
    return total;
  }
}

/**
 * Fold start/stop/prefix into one half-open range [start, stop) (stop null: no end).
 * @param {{start?: Uint8Array | null, stop?: Uint8Array | null, prefix?: Uint8Array | null}} bounds
 * @returns {[Uint8Array, Uint8Array | null]}
 */
export function span({ start = null, stop = null, prefix = null }) {
  let lo = start ?? new Uint8Array(0);
  let hi = stop;
  if (prefix && prefix.length) {
    if (compareBytes(prefix, lo) > 0) lo = prefix;
    const end = prefixStop(prefix);
    if (end) hi = hi === null || compareBytes(end, hi) < 0 ? end : hi;
  }
  return [lo, hi];
}

/**
 * Entries ``i``, ``i + 1``, ... of an index block as [key, offset, length], up to a key >= stop.
 * @param {IndexBlock} block @param {number} i @param {Uint8Array | null} stop
 * @returns {AsyncGenerator<[Uint8Array, number, number]>}
 */
async function* entriesOf(block, i, stop) {
  for (let j = i; j < block.keys.length; j++) {
    if (stop && compareBytes(block.keys[j], stop) >= 0) return;
    yield [block.keys[j], block.offsets[j], block.lengths[j]];
  }
}

/** @template T @param {...AsyncGenerator<T>} parts @returns {AsyncGenerator<T>} */
async function* chained(...parts) {
  for (const part of parts) yield* part;
}

/** @template T @param {T[]} items @returns {AsyncGenerator<T>} */
async function* listed(items) {
  yield* items;
}

