// Reading the bytes a chunk ref points to: inline, embedded in the archive, a native chunk file of the
// repository (a URL, or in Node a local path), or a virtual location under an authorized prefix, with
// the ref's checksums sent as preconditions and checked in the answer, as icechunk checks them.
// Nothing outside the authorized prefixes is ever opened.
import { ZSCorrupt, ZSError } from "../errors.js";
import { TIMEOUT_MS, boundedBody, contentRange, deadline, isHttpUrl, networkError } from "../io/transport.js";
import { coordsText } from "./refspec.js";
import { formatTime } from "./times.js";

const CHUNK_ID = /^[0-9A-HJKMNP-TV-Z]{20}$/;
const URL_PARTS = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)/;
const inNode = typeof process !== "undefined" && Boolean(process.versions?.node);

/**
 * @typedef {object} ChunkInfo
 * @property {string} path
 * @property {number[]} coords
 * @property {"inline" | "native" | "virtual"} kind
 * @property {number} offset
 * @property {number} length
 * @property {string | null} chunkId
 * @property {string | null} location
 * @property {string | null} checksumEtag
 * @property {number | null} checksumLastModified
 * @property {Uint8Array | null} inline
 * @property {[number, number] | null} [refRange] of a ref narrowed to part of its range (an inner chunk of a
 *   shard, its index): ``[offset, length]`` of the whole ref, by which an archive keeps a virtual ref's bytes
 */

/** An ETag without its weak marker and quotes. @param {string} etag */
const opaqueTag = (etag) => etag.trim().replace(/^W\//, "").replace(/^"+|"+$/g, "");

/**
 * null if an answer with ``etag`` and ``modified`` (seconds) is the version a ref pins, else what
 * differs (zsarchive/io/pinning.py).
 * @param {string | null} pinnedEtag @param {number | null} pinnedModified
 * @param {string | null} etag @param {number | null} modified
 */
export function mismatch(pinnedEtag, pinnedModified, etag, modified) {
  if (pinnedEtag && opaqueTag(pinnedEtag) !== "*") {
    if (!etag) return `the ref's ETag is ${pinnedEtag}, the answer carries none`;
    if (opaqueTag(etag) !== opaqueTag(pinnedEtag)) return `the ref's ETag is ${pinnedEtag}, the answer's is ${etag}`;
  }
  if (pinnedModified) {
    if (modified === null) return `the ref's checksum time is ${shown(pinnedModified)}, the answer carries no Last-Modified`;
    if (modified > pinnedModified) {
      return `the answer's Last-Modified is ${shown(modified)}, after the ref's checksum time ${shown(pinnedModified)}`;
    }
  }
  return null;
}

/** @param {number} seconds */
function shown(seconds) {
  try {
    return new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
  } catch {
    return `${seconds} s after 1970`;
  }
}

/**
 * ``length`` bytes at ``offset`` of ``url`` in one request, with ``headers`` (the ref's preconditions);
 * [bytes, the answer's ETag, its Last-Modified in seconds].
 * @param {typeof fetch} fetcher @param {string} url @param {number} offset @param {number} length
 * @param {Record<string, string>} headers
 * @returns {Promise<[Uint8Array, string | null, number | null]>}
 */
async function fetchRange(fetcher, url, offset, length, headers) {
  let response;
  try {
    response = await fetcher(url, { headers: { ...headers, Range: `bytes=${offset}-${offset + length - 1}` }, cache: "no-store",
      signal: deadline(TIMEOUT_MS, length) });
  } catch (err) {
    throw networkError(url, err, TIMEOUT_MS);
  }
  const etag = response.headers.get("ETag");
  const modified = response.headers.get("Last-Modified");
  const seconds = modified && !Number.isNaN(Date.parse(modified)) ? Math.floor(Date.parse(modified) / 1000) : null;
  if (response.status === 416) {
    await response.body?.cancel();
    return [new Uint8Array(0), etag, seconds];
  }
  if (response.status === 200) {
    const body = await boundedBody(response, offset + length, url).catch(() => {
      throw new ZSError(`cannot read ${url}: the server ignores Range requests and sends more than ${offset + length} bytes`);
    });
    return [body.slice(offset, offset + length), etag, seconds];
  }
  if (response.status !== 206) {
    await response.body?.cancel();
    throw new ZSError(`cannot read ${url}: HTTP ${response.status} ${response.statusText}`.trimEnd());
  }
  const [start, end] = contentRange(response, url);
  if (start !== offset || end > offset + length - 1) {
    await response.body?.cancel();
    throw new ZSError(`cannot read ${url}: asked for bytes ${offset}-${offset + length - 1}, the server sent ${start}-${end}`);
  }
  return [await boundedBody(response, length, url), etag, seconds];
}

/** Reads chunk bytes for one archive. */
export class ChunkReader {
  /**
   * @param {string} name the archive, for messages
   * @param {string[]} authorize location prefixes under which virtual refs may be read
   * @param {(chunkId: string, start: number, stop: number) => Promise<Uint8Array | null>} embedded
   * @param {typeof fetch} [fetcher]
   * @param {(key: any[], start: number, stop: number) => Promise<Uint8Array | null>} [embeddedVirtual] bytes of a
   *   virtual range the archive keeps (``[location, offset, length, etag, last_modified]`` of the whole ref),
   *   read before any source and needing no authorization
   */
  constructor(name, authorize, embedded, fetcher, embeddedVirtual) {
    this.name = name;
    this.authorize = [...authorize];
    this.embedded = embedded;
    this.embeddedVirtual = embeddedVirtual ?? null;
    this.fetcher = fetcher ?? globalThis.fetch?.bind(globalThis);
  }

  /**
   * The bytes of a chunk ref (read at REF, for messages); ``repo``: where native chunks not embedded in
   * the archive are (a URL, or in Node a local path, of the repository).
   * @param {ChunkInfo} chunk @param {string} ref @param {string | null} [repo]
   * @returns {Promise<Uint8Array>}
   */
  async read(chunk, ref, repo = null) {
    const where = `chunk ${coordsText(chunk.coords)} of ${JSON.stringify(chunk.path)} at ${JSON.stringify(ref)}`;
    if (chunk.kind === "inline") return /** @type {Uint8Array} */ (chunk.inline);
    const { offset, length } = chunk;
    if (!(Number.isSafeInteger(offset) && Number.isSafeInteger(length) && offset >= 0 && length >= 0)) {
      throw new ZSCorrupt(`${this.name}: ${where}: offset ${offset} and length ${length} must be integers >= 0`);
    }
    if (chunk.kind === "native") {
      const chunkId = chunk.chunkId;
      if (typeof chunkId !== "string" || !CHUNK_ID.test(chunkId)) {
        throw new ZSCorrupt(`${this.name}: ${where}: invalid chunk id ${JSON.stringify(chunkId)}`);
      }
      let embedded;
      try {
        embedded = await this.embedded(chunkId, offset, offset + length);
      } catch (err) {
        if (err instanceof ZSCorrupt) throw new ZSCorrupt(`${where}: ${err.message}`);
        throw err;
      }
      if (embedded !== null) return embedded;
      if (!repo) {
        throw new ZSError(`${where} is native chunk ${chunkId}, not embedded in the archive: give the repository ` +
          "(repo: its URL)");
      }
      const base = repo.replace(/\/+$/, "");
      if (isHttpUrl(base)) return this.readUrl(`${base}/chunks/${chunkId}`, offset, length, where, null, null);
      if (inNode) return this.readLocal(`${base}/chunks/${chunkId}`, offset, length, where, null, null);
      throw new ZSError(`${where}: the repository ${repo} is not an http(s) URL`);
    }
    const location = /** @type {string} */ (chunk.location);
    if (this.embeddedVirtual !== null) {
      const [whole, size] = chunk.refRange ?? [offset, length];
      let kept;
      try {
        kept = await this.embeddedVirtual([location, whole, size, chunk.checksumEtag, chunk.checksumLastModified],
          offset, offset + length);
      } catch (err) {
        if (err instanceof ZSCorrupt) throw new ZSCorrupt(`${where}: ${err.message}`);
        throw err;
      }
      if (kept !== null) return kept;
    }
    const scheme = (URL_PARTS.exec(location)?.[1] ?? "").toLowerCase();
    if (scheme === "http" || scheme === "https") {
      this.authorizedUrl(location, where);
      return this.readUrl(location, offset, length, where, chunk.checksumEtag, chunk.checksumLastModified);
    }
    if (scheme === "file" || (!scheme && location.startsWith("/"))) {
      if (!inNode) throw new ZSError(`${where}: virtual location ${JSON.stringify(location)} is a local file, which a browser cannot read`);
      const path = await this.authorizedLocalPath(location, where);
      return this.readLocal(path, offset, length, where, chunk.checksumEtag, chunk.checksumLastModified);
    }
    throw new ZSError(`${where}: virtual location ${JSON.stringify(location)} uses scheme ${JSON.stringify(scheme)}, which ` +
      "the JavaScript reader does not read (http(s) URLs, and file:// in Node; zsarchive in Python reads object stores)");
  }

  /** The authorized prefix a URL lies under (ZSError if none). @param {string} location @param {string} where */
  authorizedUrl(location, where) {
    const parts = URL_PARTS.exec(location);
    let path = "";
    try {
      path = decodeURIComponent(parts?.[3] ?? "");
    } catch {
      path = parts?.[3] ?? "";
    }
    if (path.split("/").some((seg) => seg === "." || seg === "..")) {
      throw new ZSError(`${where}: virtual location ${JSON.stringify(location)} has '.' or '..' path segments`);
    }
    for (const prefix of this.authorize) {
      const pre = URL_PARTS.exec(prefix);
      if (pre && parts && pre[1].toLowerCase() === parts[1].toLowerCase() && pre[2] === parts[2] && pre[3] &&
          parts[3].startsWith(pre[3].endsWith("/") ? pre[3] : pre[3] + "/")) {
        return prefix;
      }
    }
    throw new ZSError(`${where}: virtual location ${JSON.stringify(location)} is not under an authorized prefix; authorize ` +
      `it with authorize: [${JSON.stringify(location.slice(0, location.lastIndexOf("/") + 1))}]`);
  }

  /**
   * @param {string} url @param {number} offset @param {number} length @param {string} where
   * @param {string | null} etag @param {number | null} lastModified
   */
  async readUrl(url, offset, length, where, etag, lastModified) {
    /** @type {Record<string, string>} */
    const headers = {};
    // If-Match compares strongly: a weak ETag is checked in the answer only
    if (etag && !etag.startsWith("W/")) headers["If-Match"] = etag.startsWith('"') || etag === "*" ? etag : `"${etag}"`;
    if (lastModified) headers["If-Unmodified-Since"] = new Date(lastModified * 1000).toUTCString();
    let data, answerEtag, answerModified;
    try {
      [data, answerEtag, answerModified] = await fetchRange(this.fetcher, url, offset, length, headers);
    } catch (err) {
      const checks = Object.entries(headers).map(([k, v]) => `${k} ${v}`).join(", ");
      throw new ZSError(`${where}: ${err.message}${checks ? ` (${checks})` : ""}`);
    }
    // a server that ignores the preconditions answers with what it holds now: check the answer itself
    const differs = mismatch(etag, lastModified, answerEtag, answerModified);
    if (differs && data.length) throw new ZSError(`${where}: ${url} changed since the virtual ref was written (${differs})`);
    if (data.length !== length) {
      throw new ZSCorrupt(`${where}: ${url} holds ${data.length} bytes at offset ${offset}, expected ${length}`);
    }
    return data;
  }

  /** @param {string} location @param {string} where */
  async authorizedLocalPath(location, where) {
    const fs = await import("node:fs/promises");
    const nodePath = await import("node:path");
    let path = location;
    if (/^file:/i.test(location)) {
      const parts = URL_PARTS.exec(location);
      path = decodeURIComponent(parts?.[3] ?? "");
    }
    if (!nodePath.isAbsolute(path)) throw new ZSError(`${where}: virtual location ${JSON.stringify(location)} is not an absolute path`);
    const real = await fs.realpath(path).catch(() => nodePath.resolve(path));
    for (const prefix of this.authorize) {
      let base = prefix;
      if (/^file:/i.test(prefix)) base = decodeURIComponent(URL_PARTS.exec(prefix)?.[3] ?? "");
      else if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(prefix)) continue;
      if (!base) continue;
      const baseReal = await fs.realpath(base).catch(() => nodePath.resolve(base));
      if (real === baseReal || real.startsWith(baseReal.replace(/\/+$/, "") + "/")) return real;
    }
    throw new ZSError(`${where}: virtual location ${JSON.stringify(location)} is not under an authorized prefix; authorize it ` +
      `with authorize: [${JSON.stringify("file://" + nodePath.dirname(real).replace(/\/+$/, "") + "/")}]`);
  }

  /**
   * Bytes of a local file (Node), refused when the file changed since a virtual ref pinned it: its ETag
   * as icechunk's local store makes it (``inode-mtime_us-size`` in hex), or a modification after the
   * ref's time.
   * @param {string} path @param {number} offset @param {number} length @param {string} where
   * @param {string | null} etag @param {number | null} lastModified
   */
  async readLocal(path, offset, length, where, etag, lastModified) {
    const fs = await import("node:fs/promises");
    let handle;
    try {
      handle = await fs.open(path, "r");
      const info = await handle.stat({ bigint: true });
      const wanted = etag ? etag.replace(/^"+|"+$/g, "") : null;
      if (wanted && wanted !== "*") {
        const local = `${info.ino.toString(16)}-${(info.mtimeNs / 1000n).toString(16)}-${info.size.toString(16)}`;
        if (local !== wanted) {
          throw new ZSError(`${where}: ${path} changed since the virtual ref was written (the ref's ETag checksum is ` +
            `${JSON.stringify(etag)}, the file's is ${JSON.stringify(local)})`);
        }
      }
      if (lastModified && info.mtimeNs > BigInt(lastModified) * 1000000000n) {
        throw new ZSError(`${where}: ${path} changed since the virtual ref was written (modified ` +
          `${formatTime(Number(info.mtimeNs / 1000n))}, after the ref's checksum time ${formatTime(lastModified * 1e6)})`);
      }
      const out = new Uint8Array(length);
      const { bytesRead } = await handle.read(out, 0, length, offset);
      if (bytesRead !== length) throw new ZSCorrupt(`${where}: ${path} holds ${bytesRead} bytes at offset ${offset}, expected ${length}`);
      return out;
    } catch (err) {
      if (err instanceof ZSError) throw err;
      throw new ZSError(`${where}: cannot read ${path}: ${err.code ?? err.message}`);
    } finally {
      await handle?.close();
    }
  }
}
