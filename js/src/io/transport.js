// Where an archive's bytes come from: a URL read by range requests (fetch), a File or Blob, or in Node
// a local path. One small interface: ``size``, ``readHeadTail``, ``read``, ``readRanges``, ``stats``.
//
// A URL is pinned by its first answers (ETag, else Last-Modified): later requests carry If-Match (or
// If-Unmodified-Since) and every answer's own ETag is checked too, so a file replaced on a server that
// ignores the condition fails loudly instead of mixing bytes of two versions (as the Python reader).
import { ZSCorrupt, ZSError } from "../errors.js";
import { readAnnounced, readBounded } from "../bytes.js";
import { MAX_UNRANGED } from "../limits.js";

/** Ranges at most this far apart share one request in readRanges (a round trip costs more). */
const COALESCE_GAP = 64 * 1024;
/** The largest request readRanges builds by merging. */
const COALESCE_LIMIT = 8 * 1024 * 1024;
const CONTENT_RANGE = /^bytes\s+(?:(\d+)-(\d+)|\*)\/(\d+|\*)\s*$/;
const RETRY_STATUS = new Set([408, 429, 500, 502, 503, 504]);
const RETRIES = 3;
/** Milliseconds an answer may take to begin, and bytes per second its body must arrive at beyond that: a
 * server that drips bytes just fast enough to keep a connection open cannot hold a reader forever. */
export const TIMEOUT_MS = 30_000;
const MIN_RATE = 64 * 1024;
const inBrowser = typeof window !== "undefined";

/**
 * A signal that aborts a request for ``length`` bytes once it took longer than it may.
 * @param {number} timeout milliseconds @param {number} length
 */
export function deadline(timeout, length) {
  return AbortSignal.timeout(timeout + Math.ceil((1000 * length) / MIN_RATE));
}

/**
 * ``err`` (a failed fetch or body read) as one line naming ``name``.
 * @param {string} name @param {unknown} err @param {number} timeout
 */
export function networkError(name, err, timeout) {
  const error = /** @type {any} */ (err);
  if (error && (error.name === "TimeoutError" || error.name === "AbortError")) {
    return new ZSError(`${name}: no complete answer in time (${timeout / 1000} s, and 64 KiB/s of body)`);
  }
  return new ZSError(`${name}: cannot read (${error && error.message ? error.message : error}` +
    (inBrowser ? "; a server of another origin must allow it: CORS)" : ")"));
}

/**
 * @typedef {object} Transport
 * @property {string} name
 * @property {number} size valid once readHeadTail answered
 * @property {{requests: number, bytes: number}} stats
 * @property {(head: number, tail: number) => Promise<[Uint8Array, Uint8Array]>} readHeadTail
 * @property {(offset: number, length: number) => Promise<Uint8Array>} read
 * @property {(ranges: Array<[number, number]>) => Promise<Uint8Array[]>} readRanges
 * @property {() => Promise<void>} [close]
 */

/**
 * Group ``[offset, length]`` ranges into runs that share one request: ``[start, length, members]``.
 * @param {Array<[number, number]>} ranges
 * @param {number} gap
 * @param {number} limit
 * @returns {Array<[number, number, number[]]>}
 */
export function coalesce(ranges, gap = COALESCE_GAP, limit = COALESCE_LIMIT) {
  const order = ranges.map((_, i) => i).sort((a, b) => ranges[a][0] - ranges[b][0]);
  /** @type {Array<[number, number, number[]]>} */
  const runs = [];
  /** @type {number[]} */
  let members = [];
  let start = 0, end = 0;
  for (const i of order) {
    const [offset, length] = ranges[i];
    if (members.length && offset - end <= gap && Math.max(end, offset + length) - start <= limit) {
      end = Math.max(end, offset + length);
      members.push(i);
      continue;
    }
    if (members.length) runs.push([start, end - start, members]);
    [start, end, members] = [offset, offset + length, [i]];
  }
  if (members.length) runs.push([start, end - start, members]);
  return runs;
}

/** What every transport shares: bounds checks, bytes already held, readRanges by coalesced runs. */
class BaseTransport {
  /** @param {string} name */
  constructor(name) {
    this.name = name;
    /** @type {number} */
    this.size = -1;
    this.stats = { requests: 0, bytes: 0 };
    /** @type {Array<[number, Uint8Array]>} */
    this.held = [];
  }

  /** @param {number} offset @param {number} length */
  check(offset, length) {
    if (offset < 0 || length < 0 || offset + length > this.size) {
      throw new ZSCorrupt(`${this.name}: offset ${offset}: read of ${length} bytes runs past the end of the ` +
        `${this.size}-byte file`);
    }
  }

  /** @param {number} offset @param {number} length @returns {Uint8Array | null} */
  fromHeld(offset, length) {
    for (const [start, data] of this.held) {
      if (start <= offset && offset + length <= start + data.length) {
        return data.subarray(offset - start, offset - start + length);
      }
    }
    return null;
  }

  /** @param {number} head @param {number} tail @returns {Promise<[Uint8Array, Uint8Array]>} */
  async readHeadTail(head, tail) {
    head = Math.min(head, this.size);
    tail = Math.min(tail, this.size);
    return Promise.all([this.read(0, head), this.read(this.size - tail, tail)]);
  }

  /** @param {number} offset @param {number} length @returns {Promise<Uint8Array>} */
  async read(offset, length) {
    this.check(offset, length);
    if (length === 0) return new Uint8Array(0);
    return this.fromHeld(offset, length) ?? this.fetch(offset, length);
  }

  /**
   * Several ranges: those held cost nothing, nearby ones share a request, requests run concurrently.
   * @param {Array<[number, number]>} ranges
   * @returns {Promise<Uint8Array[]>}
   */
  async readRanges(ranges) {
    /** @type {Uint8Array[]} */
    const results = new Array(ranges.length);
    const wanted = [];
    ranges.forEach(([offset, length], i) => {
      this.check(offset, length);
      const held = length ? this.fromHeld(offset, length) : new Uint8Array(0);
      if (held) results[i] = held;
      else wanted.push(i);
    });
    const runs = coalesce(wanted.map((i) => ranges[i]));
    const bodies = await Promise.all(runs.map(([start, length]) => this.fetch(start, length)));
    runs.forEach(([start], r) => {
      for (const member of runs[r][2]) {
        const i = wanted[member];
        const [offset, length] = ranges[i];
        results[i] = bodies[r].subarray(offset - start, offset - start + length);
      }
    });
    return results;
  }

  /** @param {number} offset @param {number} length @returns {Promise<Uint8Array>} */
  async fetch(offset, length) {
    throw new Error(`${this.name}: no reads (${offset}, ${length})`);
  }
}

/**
 * Read a response's body, never more than ``limit`` bytes whatever its headers claim.
 * @param {Response} response
 * @param {number} limit
 * @param {string} name
 * @param {number} [timeout] the request's, for the message when it runs out
 * @returns {Promise<Uint8Array>}
 */
export async function boundedBody(response, limit, name, timeout = TIMEOUT_MS) {
  const announced = Number(response.headers.get("Content-Length") ?? NaN);
  if (announced > limit) {
    await response.body?.cancel();
    throw new ZSError(`${name}: the server announces a body of ${announced} bytes where at most ${limit} can be right`);
  }
  if (!response.body) return new Uint8Array(0);
  const encoded = (response.headers.get("Content-Encoding") ?? "identity") !== "identity";
  try {
    if (Number.isSafeInteger(announced) && announced >= 0 && !encoded) {  // within bounds: one buffer of that length
      return await readAnnounced(response.body, announced,
        () => new ZSError(`${name}: the server sent more than the ${announced} bytes it announced`));
    }
    return await readBounded(response.body, limit,
      () => new ZSError(`${name}: the server sent more than the ${limit} bytes that can be right`));
  } catch (err) {
    throw err instanceof ZSError ? err : networkError(name, err, timeout);
  }
}

/**
 * ``[start, end, total]`` of a 206 answer's Content-Range; ZSError when it is missing or unusable (a
 * server that does not expose it to scripts: CORS must list it in Access-Control-Expose-Headers).
 * @param {Response} response
 * @param {string} name
 * @returns {[number, number, number]}
 */
export function contentRange(response, name) {
  const value = response.headers.get("Content-Range") ?? "";
  const match = CONTENT_RANGE.exec(value);
  if (!match || match[1] === undefined || match[3] === "*") {
    throw new ZSError(`${name}: HTTP 206 with unusable Content-Range ${JSON.stringify(value)} (a server reached ` +
      "across origins must expose Content-Range and ETag: Access-Control-Expose-Headers)");
  }
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}

/** An object on an HTTP(S) server (or a bucket's HTTPS endpoint) read by range requests. */
export class HTTPTransport extends BaseTransport {
  /**
   * @param {string} url
   * @param {{fetch?: typeof fetch, headers?: Record<string, string>, maxUnranged?: number, timeout?: number}} [options]
   *   ``timeout``: milliseconds an answer may take to begin (30 s)
   */
  constructor(url, options = {}) {
    super(url);
    this.url = url;
    this.fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.headers = options.headers ?? {};
    this.timeout = options.timeout ?? TIMEOUT_MS;
    this.maxUnranged = options.maxUnranged ?? MAX_UNRANGED;
    /** @type {string | null} */
    this.etag = null;
    /** @type {string | null} */
    this.lastModified = null;
    this.pinned = false;
  }

  /**
   * One range request (``length`` bytes expected), retried on a lost connection or a transient status.
   * @param {string} range @param {number} length @returns {Promise<Response>}
   */
  async send(range, length) {
    const headers = { ...this.headers, Range: range };
    if (this.pinned) {
      // If-Match compares strongly: a weak ETag can only be checked in the answer
      if (this.etag && !this.etag.startsWith("W/")) headers["If-Match"] = this.etag;
      else if (this.lastModified) headers["If-Unmodified-Since"] = this.lastModified;
    }
    for (let attempt = 0; ; attempt++) {
      let response;
      try {
        response = await this.fetcher(this.url, { headers, cache: "no-store", signal: deadline(this.timeout, length) });
      } catch (err) {
        if (attempt < RETRIES) {
          await new Promise((done) => setTimeout(done, 100 * 2 ** attempt));
          continue;
        }
        throw networkError(this.name, err, this.timeout);
      }
      this.stats.requests += 1;
      if (RETRY_STATUS.has(response.status) && attempt < RETRIES) {
        await response.body?.cancel();
        await new Promise((done) => setTimeout(done, 100 * 2 ** attempt));
        continue;
      }
      if (response.status === 412) {
        await response.body?.cancel();
        throw new ZSCorrupt(`${this.name}: file changed while reading (HTTP 412 Precondition Failed for ` +
          `${headers["If-Match"] ?? headers["If-Unmodified-Since"]})`);
      }
      if (![200, 206, 416].includes(response.status)) {
        await response.body?.cancel();
        throw new ZSError(`${this.name}: HTTP ${response.status} ${response.statusText}`.trimEnd());
      }
      return response;
    }
  }

  /** Remember the object's version from the first answer; insist on it in every later one. @param {Response} response */
  pin(response) {
    const etag = response.headers.get("ETag"), modified = response.headers.get("Last-Modified");
    if (!this.pinned) {
      [this.etag, this.lastModified, this.pinned] = [etag, modified, true];
      return;
    }
    if ((this.etag || etag) && etag !== this.etag) {
      throw new ZSCorrupt(`${this.name}: file changed while reading (ETag was ${this.etag}, now ${etag})`);
    }
    if (!this.etag && modified !== this.lastModified) {
      throw new ZSCorrupt(`${this.name}: file changed while reading (Last-Modified was ${this.lastModified}, now ${modified})`);
    }
  }

  /** @param {number} head @param {number} tail @returns {Promise<[Uint8Array, Uint8Array]>} */
  async readHeadTail(head, tail) {
    if (this.size >= 0) return super.readHeadTail(head, tail);
    const wanted = [`bytes=0-${Math.max(head, 1) - 1}`];
    if (tail > 0) wanted.push(`bytes=-${tail}`);
    // both go out together (one round trip), each body read as soon as its answer begins
    /** @type {Array<[number, number, Uint8Array]>} */
    const pieces = await Promise.all(wanted.map(async (range) => {
      const response = await this.send(range, Math.max(head, tail));
      this.pin(response);
      if (response.status === 200) {
        const body = await boundedBody(response, this.maxUnranged, this.name, this.timeout).catch((err) => {
          throw new ZSError(`${this.name}: the server ignores Range requests (HTTP 200 with the whole body); ` +
            `refusing: ${err.message}`);
        });
        return [body.length, 0, body];
      }
      if (response.status === 416) {
        await response.body?.cancel();
        return [0, 0, new Uint8Array(0)];
      }
      const [start, end, total] = contentRange(response, this.name);
      return [total, start, await boundedBody(response, end - start + 1, this.name, this.timeout)];
    }));
    const sizes = new Set(pieces.map(([total]) => total));
    if (sizes.size !== 1) {
      throw new ZSCorrupt(`${this.name}: file changed while reading (answers give lengths ${[...sizes].join(", ")})`);
    }
    this.size = [...sizes][0];
    for (const [, start, body] of pieces) {
      if (start === 0 && body.length === this.size && body.length) {
        this.held.push([0, body]);  // a server that ignored Range sent everything: keep it
        return [body.subarray(0, head), body.subarray(Math.max(0, this.size - tail))];
      }
    }
    head = Math.min(head, this.size);
    tail = Math.min(tail, this.size);
    const expected = [[0, head], [this.size - tail, tail]];
    pieces.forEach(([, start, body], i) => {
      const [want, length] = expected[i];
      if ((start !== want || body.length !== length) && length) {
        throw new ZSError(`${this.name}: asked for ${length} bytes at offset ${want}, the server sent ` +
          `${body.length} at offset ${start}`);
      }
      if (length) this.held.push([start, body]);
    });
    return [pieces[0][2].subarray(0, head), tail ? pieces[pieces.length - 1][2] : new Uint8Array(0)];
  }

  /** @param {number} offset @param {number} length @returns {Promise<Uint8Array>} */
  async fetch(offset, length) {
    const response = await this.send(`bytes=${offset}-${offset + length - 1}`, length);
    this.pin(response);
    if (response.status === 200) {
      const body = await boundedBody(response, Math.min(this.size, this.maxUnranged), this.name, this.timeout);
      if (body.length !== this.size) {
        throw new ZSCorrupt(`${this.name}: file changed while reading (length was ${this.size}, the server now ` +
          `sends ${body.length} bytes)`);
      }
      this.held.push([0, body]);
      this.stats.bytes += body.length;
      return body.subarray(offset, offset + length);
    }
    if (response.status === 416) {
      await response.body?.cancel();
      throw new ZSCorrupt(`${this.name}: file changed while reading (bytes ${offset}-${offset + length - 1} of ` +
        `${this.size} are no longer there)`);
    }
    const [start, end, total] = contentRange(response, this.name);
    if (total !== this.size) {
      await response.body?.cancel();
      throw new ZSCorrupt(`${this.name}: file changed while reading (length was ${this.size}, now ${total})`);
    }
    if (start !== offset || end !== offset + length - 1) {
      await response.body?.cancel();
      throw new ZSError(`${this.name}: asked for bytes ${offset}-${offset + length - 1}, the server sent ${start}-${end}`);
    }
    const body = await boundedBody(response, length, this.name, this.timeout);
    if (body.length !== length) {
      throw new ZSCorrupt(`${this.name}: short read: ${body.length} bytes of ${length} at offset ${offset}`);
    }
    this.stats.bytes += length;
    return body;
  }
}

/** A File or Blob (a file the user picked, bytes in memory). */
export class BlobTransport extends BaseTransport {
  /** @param {Blob} blob @param {string} [name] */
  constructor(blob, name) {
    super(name ?? /** @type {any} */ (blob).name ?? "archive");
    this.blob = blob;
    this.size = blob.size;
  }

  /** @param {number} offset @param {number} length */
  async fetch(offset, length) {
    this.stats.requests += 1;
    this.stats.bytes += length;
    return new Uint8Array(await this.blob.slice(offset, offset + length).arrayBuffer());
  }
}

/** A local file, in Node. */
export class FileTransport extends BaseTransport {
  /** @param {string} path @param {any} handle a node:fs/promises FileHandle @param {number} size */
  constructor(path, handle, size) {
    super(path);
    this.handle = handle;
    this.size = size;
  }

  /** @param {string} path */
  static async open(path) {
    const fs = await import("node:fs/promises");
    let handle;
    try {
      handle = await fs.open(path, "r");
      const info = await handle.stat();
      if (!info.isFile()) throw new ZSError(`${path}: not a regular file`);
      return new FileTransport(path, handle, info.size);
    } catch (err) {
      await handle?.close();
      if (err instanceof ZSError) throw err;
      throw new ZSError(`${path}: cannot open: ${err.code ?? err.message}`);
    }
  }

  /** @param {number} offset @param {number} length */
  async fetch(offset, length) {
    const out = new Uint8Array(length);
    let done = 0;
    while (done < length) {
      const { bytesRead } = await this.handle.read(out, done, length - done, offset + done);
      if (!bytesRead) throw new ZSCorrupt(`${this.name}: offset ${offset + done}: the file ends early`);
      done += bytesRead;
    }
    this.stats.requests += 1;
    this.stats.bytes += length;
    return out;
  }

  async close() {
    await this.handle.close();
  }
}

/**
 * Whether ``text`` is an http(s) URL.
 * @param {unknown} text
 */
export function isHttpUrl(text) {
  return typeof text === "string" && /^https?:\/\//i.test(text);
}

/**
 * The transport of a URL (relative URLs resolve against the page), a File or Blob, or in Node a local
 * path or file:// URL.
 * @param {string | Blob | URL} source
 * @param {object} [options] for an HTTP transport
 * @returns {Promise<Transport>}
 */
export async function openTransport(source, options) {
  if (typeof Blob !== "undefined" && source instanceof Blob) return new BlobTransport(source);
  const text = source instanceof URL ? source.href : source;
  if (typeof text !== "string" || !text) throw new ZSError("give an archive: a URL, a File or Blob, or in Node a path");
  if (isHttpUrl(text)) return new HTTPTransport(text, options);
  const inNode = typeof process !== "undefined" && process.versions?.node;
  if (inNode) {
    const path = text.startsWith("file://") ? (await import("node:url")).fileURLToPath(text) : text;
    return FileTransport.open(path);
  }
  if (globalThis.location && !/^[a-z][a-z0-9+.-]*:/i.test(text)) {
    return new HTTPTransport(new URL(text, globalThis.location.href).href, options);
  }
  throw new ZSError(`${text}: not a URL this reader reads (http, https, or a path relative to the page)`);
}
