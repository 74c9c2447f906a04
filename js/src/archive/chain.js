// A chain of fragments read as one archive: each base found relative to the fragment naming it and
// checked against its hash, the chain's records merged by key, the newest winning, tombstones removed
// (docs/archive-format.rst, "Fragments").
import { ZSCorrupt, ZSError } from "../errors.js";
import { compareBytes } from "../zs/block.js";
import { DataBlock, ZS } from "../zs/reader.js";
import { BlobTransport, isHttpUrl } from "../io/transport.js";
import { ArchiveHeader, archiveMetadata, historyFromTimeline, refsByManifest } from "./header.js";
import { MAX_CHAIN } from "./fragments.js";
import { CHUNK_REF, HEADER, REFS, REPO, VIRTUAL_DATA, isTombstone, familyStop } from "./schema.js";
import { decode, elementEnd, keyEnd } from "./tuples.js";

/** Small families a chain reads once and keeps (every fragment may hold some). */
const CACHED = new Set([REFS, REPO]);
const SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//;
const MAX_BASE = 4096;
const BATCH = 4096;  // records a chain's searchBatches gathers at a time

/**
 * ``path`` with "." and ".." segments folded, as posixpath.normpath does.
 * @param {string} path
 */
function normalPath(path) {
  const absolute = path.startsWith("/");
  const out = [];
  for (const part of path.split("/")) {
    if (!part || part === ".") continue;
    if (part === ".." && out.length && out[out.length - 1] !== "..") out.pop();
    else if (part !== ".." || !absolute) out.push(part);
  }
  return (absolute ? "/" : "") + out.join("/") || (absolute ? "/" : ".");
}

/**
 * Where the base named ``link`` by the fragment at ``location`` (a URL or a local path) is.
 * @param {string} location @param {string} link
 */
export function resolveBase(location, link) {
  if (isHttpUrl(location)) {
    const url = new URL(location);
    const dir = url.pathname.slice(0, url.pathname.lastIndexOf("/") + 1);
    return `${url.protocol}//${url.host}${normalPath(dir + link)}`;
  }
  const dir = location.includes("/") ? location.slice(0, location.lastIndexOf("/") + 1) : "";
  return normalPath(dir + link);
}

/**
 * ``[base link, base SHA-256 hex]`` from a fragment's metadata, null for a full archive.
 * @param {ZS} zs @param {string} where
 * @returns {[string, string] | null}
 */
export function fragmentLink(zs, where) {
  const link = archiveMetadata(zs)?.fragment;
  if (link === undefined || link === null) return null;
  const base = link?.base, digest = link?.base_sha256;
  if (typeof base !== "string" || typeof digest !== "string" || !/^[0-9a-f]{64}$/.test(digest)) {
    throw new ZSCorrupt(`${where}: malformed fragment link in the header metadata: ${JSON.stringify(link).slice(0, 200)}`);
  }
  if (!base || base.length > MAX_BASE || SCHEME.test(base) || base.startsWith("/") || base.startsWith("\\") ||
      /^[A-Za-z]:/.test(base) || base.includes("\0")) {
    throw new ZSCorrupt(`${where}: the fragment's base ${JSON.stringify(base.slice(0, 200))} is not a relative path`);
  }
  return [base, digest];
}

/** One archive of a chain: its reader, where it is, and what it holds (info null: a full archive). */
export class Member {
  /**
   * @param {ZS} zs @param {string} location @param {import("./fragments.js").FragmentInfo | null} info
   * @param {ArchiveHeader | null} header
   */
  constructor(zs, location, info, header) {
    this.zs = zs;
    this.location = location;
    this.info = info;
    this.header = header;
  }

  /**
   * Whether this archive may hold a record of ``family`` whose first key element is ``first``, and a
   * chunk ref under the (node, coords) prefix ``chunk`` if given.
   * @param {string | null} family @param {unknown} first @param {Uint8Array | null} chunk
   */
  mayHold(family, first, chunk) {
    if (!this.info || family === null || family === HEADER) return true;
    const held = this.info.holdings.get(family);
    if (!held || !(held.firsts === null || first === null || first === undefined || held.firsts.has(/** @type {any} */ (first)))) {
      return false;
    }
    return !chunk || !this.info.chunkFilter || this.info.chunkFilter.mayHold(chunk);
  }

  /** Whether this archive may hold tombstones of ``family`` (null: any). @param {string | null} family */
  mayTombstone(family) {
    if (!this.info) return false;
    if (family === null) return [...this.info.holdings.values()].some((h) => h.tombstones);
    return (this.info.holdings.get(family)?.tombstones ?? 0) > 0;
  }
}

/**
 * The family and first key element a search bound fixes, and the bound itself when it is a chunk
 * ref's (node, coords) prefix.
 * @param {Uint8Array} hint
 * @returns {[string | null, unknown, Uint8Array | null]}
 */
function familyFirst(hint) {
  if (!hint.length) return [null, null, null];
  const family = String.fromCharCode(hint[0]);
  let elements;
  try {
    [elements] = decode(hint, 1, hint.length, "search bound");
  } catch {
    return [family, null, null];  // a bound cut inside an element: the family alone is known
  }
  return [family, elements.length ? elements[0] : null, family === CHUNK_REF && elements.length === 2 ? hint : null];
}

/**
 * The records of ``streams`` (newest first) merged by key: the newest of equal keys, tombstones dropped.
 * @param {AsyncGenerator<Uint8Array>[]} streams
 * @returns {AsyncGenerator<Uint8Array>}
 */
async function* merged(streams) {
  /** @type {Array<{key: Uint8Array, rec: Uint8Array} | null>} */
  const heads = [];
  const advance = async (/** @type {number} */ i) => {
    const { done, value } = await streams[i].next();
    heads[i] = done ? null : { rec: value, key: value.subarray(0, keyEnd(value)) };
  };
  for (let i = 0; i < streams.length; i++) await advance(i);
  let last = null;
  for (;;) {
    let best = -1;
    for (let i = 0; i < heads.length; i++) {
      const head = heads[i];
      if (head && (best < 0 || compareBytes(head.key, /** @type {any} */ (heads[best]).key) < 0)) best = i;
    }
    if (best < 0) return;
    const { key, rec } = /** @type {{key: Uint8Array, rec: Uint8Array}} */ (heads[best]);
    await advance(best);
    if (last && compareBytes(key, last) === 0) continue;
    last = key;
    if (rec[key.length] !== 0) yield rec;
  }
}

/**
 * The longest common prefix of two byte strings.
 * @param {Uint8Array} a @param {Uint8Array} b
 */
function commonPrefix(a, b) {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return a.subarray(0, n);
}

/** A fragment and the archives it builds on, read as one archive (the reader interface of ZS). */
export class Chain {
  /** @param {Member[]} members newest first; the last is the full archive */
  constructor(members) {
    this.members = members;
    const newest = members[0].zs;
    this.name = newest.name;
    this.metadata = newest.metadata;
    this.codec = newest.codec;
    this.dataSha256 = newest.dataSha256;
    /** @type {Map<string, Uint8Array[]>} */
    this.small = new Map();
  }

  /** @param {Uint8Array} hint @returns {[Member[], string | null]} */
  candidates(hint) {
    const [family, first, chunk] = familyFirst(hint);
    return [this.members.filter((m) => m.mayHold(family, first, chunk)), family];
  }

  /**
   * The view's records in [start, stop) starting with prefix, as ZS.search.
   * @param {{start?: Uint8Array | null, stop?: Uint8Array | null, prefix?: Uint8Array | null}} [bounds]
   * @returns {AsyncGenerator<Uint8Array>}
   */
  search(bounds = {}) {
    const { start = null, stop = null, prefix = null } = bounds;
    const hint = prefix ?? (start && stop ? commonPrefix(start, stop) : new Uint8Array(0));
    const [members, family] = this.candidates(hint);
    if (family !== null && CACHED.has(family) && members.length > 1) return this.cached(family, start, stop, prefix);
    const streams = members.map((m) => m.zs.search(bounds));
    if (streams.length === 1 && !members[0].mayTombstone(family)) return streams[0];
    return merged(streams);
  }

  /**
   * The records of ``search`` as spans of blocks (as ZS.searchSpans): a batch of records at a time, framed.
   * @param {{start?: Uint8Array | null, stop?: Uint8Array | null, prefix?: Uint8Array | null}} [bounds]
   * @returns {AsyncGenerator<{block: DataBlock, lo: number, hi: number}>}
   */
  async *searchSpans(bounds = {}) {
    for await (const batch of this.searchBatches(bounds)) {
      const payload = new Uint8Array(batch.reduce((n, rec) => n + rec.length + 10, 0));
      let at = 0;
      for (const rec of batch) {  // uleb128 length, then the record
        for (let n = rec.length; ; n = Math.floor(n / 128)) {
          payload[at++] = n >= 128 ? (n % 128) | 0x80 : n;
          if (n < 128) break;
        }
        payload.set(rec, at);
        at += rec.length;
      }
      yield { block: new DataBlock(payload.subarray(0, at), this.name), lo: 0, hi: batch.length };
    }
  }

  /**
   * The records of ``search`` in batches (as ZS.searchBatches).
   * @param {{start?: Uint8Array | null, stop?: Uint8Array | null, prefix?: Uint8Array | null}} [bounds]
   * @returns {AsyncGenerator<Uint8Array[]>}
   */
  async *searchBatches(bounds = {}) {
    let batch = [];
    for await (const rec of this.search(bounds)) {
      batch.push(rec);
      if (batch.length === BATCH) {
        yield batch;
        batch = [];
      }
    }
    if (batch.length) yield batch;
  }

  /**
   * @param {string} family @param {Uint8Array | null} start @param {Uint8Array | null} stop @param {Uint8Array | null} prefix
   * @returns {AsyncGenerator<Uint8Array>}
   */
  async *cached(family, start, stop, prefix) {
    let view = this.small.get(family);
    if (!view) {
      view = [];
      const from = Uint8Array.of(family.charCodeAt(0));
      for await (const rec of merged(this.members.map((m) => m.zs.search({ start: from, stop: familyStop(family) })))) {
        view.push(rec);
      }
      this.small.set(family, view);
    }
    for (const rec of view) {
      if (start && compareBytes(rec, start) < 0) continue;
      if (prefix && compareBytes(rec.subarray(0, prefix.length), prefix) < 0) continue;
      if (stop && compareBytes(rec, stop) >= 0) return;
      if (prefix && compareBytes(rec.subarray(0, prefix.length), prefix) > 0) return;
      yield rec;
    }
  }

  /**
   * As ZS.floorSpan, answered by the newest archive holding records that share ``before``'s family and
   * owner (all pieces of one chunk file, or of one virtual range, live in one archive): its first key
   * element, or the first five of a virtual range (family E).
   * @param {Uint8Array} before @param {Uint8Array} stop
   */
  async floorSpan(before, stop) {
    let end = 1;
    for (let i = 0; i < (String.fromCharCode(before[0]) === VIRTUAL_DATA ? 5 : 1); i++) end = elementEnd(before, end);
    const owner = before.subarray(0, end);
    const [members] = this.candidates(owner);
    if (members.length === 1 && !members[0].mayTombstone(String.fromCharCode(owner[0]))) {
      return members[0].zs.floorSpan(before, stop);
    }
    for (const member of members) {
      const probe = (await member.zs.search({ prefix: owner }).next()).value;
      if (probe !== undefined) return isTombstone(probe) ? [] : member.zs.floorSpan(before, stop);
    }
    return [];
  }

  async close() {
    for (const member of this.members) await member.zs.close();
  }
}

/**
 * Refuse a chain whose fragments keep the per-chunk history otherwise than its full archive.
 * @param {Member[]} members
 */
function sameHistory(members) {
  const full = members[members.length - 1];
  for (const member of members.slice(0, -1)) {
    const view = /** @type {any} */ (member.info).recordsFormat, format = /** @type {any} */ (full.header).formatVersion;
    if (historyFromTimeline(view) !== historyFromTimeline(format)) {
      throw new ZSCorrupt(`${member.location}: a fragment of format ${view} over the archive ${full.location} of format ${format}`);
    }
  }
}

/**
 * The chain whose newest fragment ``zs`` is, read at ``location``; one-line errors for a base missing,
 * changed, of the wrong kind, looping back, or past MAX_CHAIN.
 * @param {ZS} zs @param {string} location @param {object} [options] for the transports of URLs
 */
export async function openChain(zs, location, options) {
  /** @type {Member[]} */
  const members = [];
  const seen = new Set();
  /** @type {ZS | null} */
  let current = zs;
  let where = location;
  try {
    for (;;) {
      const header = await ArchiveHeader.read(current, where);
      const link = fragmentLink(current, where);
      if (link === null) {
        if (refsByManifest(header.formatVersion)) {
          throw new ZSError(`${where}: an archive of format ${header.formatVersion} cannot be a fragment's base; export the repository again`);
        }
        members.push(new Member(current, where, null, header));
        sameHistory(members);
        return new Chain(members);
      }
      if (!header.fragment) throw new ZSCorrupt(`${where}: a fragment whose header record does not describe it`);
      members.push(new Member(current, where, header.fragment, header));
      seen.add(where);
      if (members.length >= MAX_CHAIN) {
        throw new ZSError(`${location}: the chain of fragments is longer than ${MAX_CHAIN} archives; consolidate it (zs consolidate)`);
      }
      if (current.transport instanceof BlobTransport) {
        throw new ZSError(`${where}: a fragment read from a file you picked cannot reach the archive it builds on; open it by URL`);
      }
      const [base, digest] = link;
      const target = resolveBase(where, base);
      if (seen.has(target)) throw new ZSCorrupt(`${where}: its base ${JSON.stringify(base)} loops back into the chain`);
      current = null;
      try {
        current = await ZS.open(target, options);
      } catch (err) {
        throw new ZSError(`${where}: cannot open its base ${target}: ${err.message}`);
      }
      const hex = Array.from(current.dataSha256, (b) => b.toString(16).padStart(2, "0")).join("");
      if (hex !== digest) {
        throw new ZSError(`${where}: its base ${target} is not the archive it was made from (SHA-256 ${hex.slice(0, 16)}..., ` +
          `the fragment names ${digest.slice(0, 16)}...)`);
      }
      if (archiveMetadata(current) === null) throw new ZSError(`${where}: its base ${target} is not a repo archive`);
      where = target;
    }
  } catch (err) {
    for (const member of members.slice(1)) await member.zs.close();
    if (current && current !== zs && members.every((m) => m.zs !== current)) await current.close();
    throw err;
  }
}
