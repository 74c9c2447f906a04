// The order-preserving, self-delimiting tuple encoding of record keys and values
// (docs/archive-format.rst, "Tuple encoding"). Decoded values: integers as numbers (BigInt beyond
// 2**53), text as strings, byte strings and blobs as Uint8Array, null, booleans, tuples as arrays.
import { concat } from "../bytes.js";
import { ZSCorrupt } from "../errors.js";
import { decodeUleb128 } from "../zs/uleb128.js";

export const END = 0x00, BYTES = 0x01, STRING = 0x02, NONE = 0x03, BLOB = 0x04, TUPLE = 0x05;
export const INT_ZERO = 0x14, INT_NEG_BIG = 0x0b, INT_POS_BIG = 0x1d, FALSE = 0x26, TRUE = 0x27;

const utf8 = new TextDecoder("utf-8", { fatal: true });
const encoder = new TextEncoder();

/**
 * @typedef {number | bigint | string | Uint8Array | null | boolean | any[]} Element
 */

/**
 * A big-endian magnitude as a number, or a BigInt past 2**53.
 * @param {Uint8Array} buf @param {number} pos @param {number} size
 * @returns {number | bigint}
 */
function magnitude(buf, pos, size) {
  if (pos + size > buf.length) throw new RangeError("integer runs past the end");
  let value = 0;
  for (let i = 0; i < size; i++) value = value * 256 + buf[pos + i];
  if (value <= Number.MAX_SAFE_INTEGER) return value;
  let big = 0n;
  for (let i = 0; i < size; i++) big = (big << 8n) | BigInt(buf[pos + i]);
  return big;
}

/**
 * A negative integer from its ones'-complement magnitude of ``size`` bytes.
 * @param {Uint8Array} buf @param {number} pos @param {number} size
 * @returns {number | bigint}
 */
function negative(buf, pos, size) {
  const stored = magnitude(buf, pos, size);
  const value = BigInt(stored) - (1n << BigInt(8 * size)) + 1n;
  return value >= -BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value;
}

/**
 * An escaped byte string from ``pos``: [its bytes, the position after its END].
 * @param {Uint8Array} buf @param {number} pos @param {string} what
 * @returns {[Uint8Array, number]}
 */
function escaped(buf, pos, what) {
  let end = buf.indexOf(0, pos);
  if (end < 0) throw new ZSCorrupt(`${what}: unterminated string at position ${pos}`);
  if (end + 1 >= buf.length || buf[end + 1] !== 0xff) return [buf.subarray(pos, end), end + 1];
  const parts = [];
  let start = pos;
  for (;;) {
    if (end < 0) throw new ZSCorrupt(`${what}: unterminated string at position ${pos}`);
    if (end + 1 < buf.length && buf[end + 1] === 0xff) {
      parts.push(buf.subarray(start, end + 1));
      start = end + 2;
      end = buf.indexOf(0, start);
      continue;
    }
    parts.push(buf.subarray(start, end));
    return [concat(parts), end + 1];
  }
}

/**
 * Decode elements from ``buf[pos:]`` until an END byte (consumed) or ``end``: [elements, next position].
 * Bytes that do not form a valid encoding raise ZSCorrupt naming ``what`` and the position.
 * @param {Uint8Array} buf @param {number} [pos] @param {number} [end] @param {string} [what]
 * @param {boolean} [nested]
 * @returns {[Element[], number]}
 */
export function decode(buf, pos = 0, end = buf.length, what = "key", nested = false) {
  const out = [];
  try {
    while (pos < end) {
      const code = buf[pos++];
      if (code === END) return [out, pos];
      if (INT_NEG_BIG < code && code < INT_POS_BIG) {
        const size = code - INT_ZERO;
        out.push(size >= 0 ? magnitude(buf, pos, size) : negative(buf, pos, -size));
        pos += Math.abs(size);
      } else if (code === STRING) {
        let raw;
        [raw, pos] = escaped(buf, pos, what);
        out.push(utf8.decode(raw));
      } else if (code === BYTES) {
        let raw;
        [raw, pos] = escaped(buf, pos, what);
        out.push(raw);
      } else if (code === TUPLE) {
        let sub;
        [sub, pos] = decode(buf, pos, end, what, true);
        out.push(sub);
      } else if (code === BLOB) {
        let size;
        [size, pos] = decodeUleb128(buf, pos, what);
        if (pos + size > end) throw new RangeError("blob runs past the end");
        out.push(buf.subarray(pos, pos + size));
        pos += size;
      } else if (code === NONE) {
        out.push(null);
      } else if (code === TRUE) {
        out.push(true);
      } else if (code === FALSE) {
        out.push(false);
      } else if (code === INT_POS_BIG) {
        const size = buf[pos];
        out.push(magnitude(buf, pos + 1, size));
        pos += 1 + size;
      } else if (code === INT_NEG_BIG) {
        const size = 255 - buf[pos];
        out.push(negative(buf, pos + 1, size));
        pos += 1 + size;
      } else {
        throw new ZSCorrupt(`${what}: unknown type code 0x${code.toString(16).padStart(2, "0")} at position ${pos - 1}`);
      }
      if (pos > end) throw new ZSCorrupt(`${what}: element runs past the end (${end}) of its bytes`);
    }
  } catch (err) {
    if (err instanceof ZSCorrupt) throw err;
    throw new ZSCorrupt(`${what}: malformed encoding near position ${pos}: ${err.message}`);
  }
  if (nested) throw new ZSCorrupt(`${what}: nested tuple not terminated before position ${end}`);
  return [out, pos];
}

/**
 * The position just after the END byte that closes the key starting at ``pos`` (a record's key starts
 * at 1, after its family tag).
 * @param {Uint8Array} buf @param {number} [pos]
 */
export function keyEnd(buf, pos = 1) {
  while (pos < buf.length && buf[pos] !== END) pos = elementEnd(buf, pos);
  if (pos >= buf.length) throw new ZSCorrupt("record key: not terminated");
  return pos + 1;
}

/**
 * The position just after the element starting at ``pos``, found without building it.
 * @param {Uint8Array} buf @param {number} pos
 */
export function elementEnd(buf, pos) {
  let depth = 0;
  const n = buf.length;
  while (pos < n) {
    const code = buf[pos++];
    if (INT_NEG_BIG < code && code < INT_POS_BIG) {
      pos += Math.abs(code - INT_ZERO);
    } else if (code === STRING || code === BYTES) {
      let end = buf.indexOf(0, pos);
      while (end >= 0 && end < n - 1 && buf[end + 1] === 0xff) end = buf.indexOf(0, end + 2);
      if (end < 0) break;
      pos = end + 1;
    } else if (code === TUPLE) {
      depth += 1;
      continue;
    } else if (code === END && depth) {
      depth -= 1;
    } else if (code === INT_POS_BIG && pos < n) {
      pos += 1 + buf[pos];
    } else if (code === INT_NEG_BIG && pos < n) {
      pos += 1 + 255 - buf[pos];
    } else if (code !== NONE && code !== TRUE && code !== FALSE) {
      throw new ZSCorrupt(`record key: unknown type code 0x${code.toString(16)} at position ${pos - 1}`);
    }
    if (depth === 0 && pos <= n) return pos;
  }
  throw new ZSCorrupt(`record key: element at position ${pos} is not terminated`);
}

/**
 * The encoding of one integer element.
 * @param {number | bigint} value
 * @returns {number[]}
 */
function encodeInt(value) {
  let big = BigInt(value);
  if (big === 0n) return [INT_ZERO];
  const neg = big < 0n;
  let mag = neg ? -big : big;
  const bytes = [];
  while (mag > 0n) {
    bytes.unshift(Number(mag & 0xffn));
    mag >>= 8n;
  }
  const size = bytes.length;
  if (neg) {
    const body = (1n << BigInt(8 * size)) - 1n - (-big);
    const out = [];
    let rest = body;
    for (let i = 0; i < size; i++) {
      out.unshift(Number(rest & 0xffn));
      rest >>= 8n;
    }
    return size <= 8 ? [INT_ZERO - size, ...out] : [INT_NEG_BIG, 255 - size, ...out];
  }
  return size <= 8 ? [INT_ZERO + size, ...bytes] : [INT_POS_BIG, size, ...bytes];
}

/**
 * An escaped byte string element body (each 0x00 as 0x00 0xff), then END.
 * @param {Uint8Array} raw
 * @returns {number[]}
 */
function escape(raw) {
  const out = [];
  for (const b of raw) {
    out.push(b);
    if (b === 0) out.push(0xff);
  }
  out.push(END);
  return out;
}

/**
 * @param {number[]} out @param {Element} item
 */
function append(out, item) {
  if (typeof item === "number" || typeof item === "bigint") {
    out.push(...encodeInt(item));
  } else if (typeof item === "string") {
    out.push(STRING, ...escape(encoder.encode(item)));
  } else if (item instanceof Uint8Array) {
    out.push(BYTES, ...escape(item));
  } else if (Array.isArray(item)) {
    out.push(TUPLE);
    for (const sub of item) append(out, sub);
    out.push(END);
  } else if (item === null) {
    out.push(NONE);
  } else if (item === true || item === false) {
    out.push(item ? TRUE : FALSE);
  } else {
    throw new TypeError(`cannot encode ${typeof item} in a tuple key`);
  }
}

/**
 * Encode key elements one after another (no terminator: a key prefix).
 * @param {Element[]} items
 * @returns {Uint8Array}
 */
export function encode(items) {
  const out = [];
  for (const item of items) append(out, item);
  return Uint8Array.from(out);
}

/**
 * Whether two decoded elements are equal (tuples element by element, bytes byte by byte).
 * @param {Element} a @param {Element} b
 * @returns {boolean}
 */
export function same(a, b) {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => same(x, b[i]));
  if (a instanceof Uint8Array && b instanceof Uint8Array) return a.length === b.length && a.every((x, i) => x === b[i]);
  if ((typeof a === "bigint" || typeof a === "number") && (typeof b === "bigint" || typeof b === "number")) {
    return BigInt(a) === BigInt(b);
  }
  return false;
}

/**
 * Whether ``key`` starts with the elements of ``prefix`` (the bytes of text "a" start those of "a\0b", so
 * a search by a key prefix's bytes also finds keys that do not start with its elements).
 * @param {Element[]} key @param {Element[]} prefix
 */
export function startsWith(key, prefix) {
  return key.length >= prefix.length && prefix.every((item, i) => same(key[i], item));
}

/** Snapshot ids read from bytes, each text made once: many chunk changes name few snapshots, in runs. */
export class SnapshotIds {
  constructor() {
    /** @type {Map<string, string>} */
    this.texts = new Map();
    this.last = new Uint8Array(0);
    this.lastText = "";
  }

  /**
   * The text of the ASCII bytes ``buf[pos:end]``.
   * @param {Uint8Array} buf @param {number} pos @param {number} end
   */
  text(buf, pos, end) {
    const last = this.last;
    if (last.length === end - pos) {
      let k = 0;
      while (k < last.length && last[k] === buf[pos + k]) k++;
      if (k === last.length) return this.lastText;  // the same snapshot as the record before
    }
    const raw = buf.subarray(pos, end);
    const made = String.fromCharCode(...raw);
    const text = this.texts.get(made) ?? made;
    this.texts.set(text, text);
    this.last = raw.slice();
    this.lastText = text;
    return text;
  }
}

/**
 * The coordinates and snapshot id of a chunk ref key from ``pos`` (after its node id): a tuple of ``ndim``
 * integers below 2**48 into ``coords``, then an ASCII text with no escaped NUL ending the key, returned;
 * null for any other shape (decode those with ``decode``). The quick path of scans of millions of changes.
 * @param {Uint8Array} buf @param {number} pos @param {number} ndim @param {Float64Array} coords
 * @param {SnapshotIds} ids
 * @returns {string | null}
 */
export function coordsAndId(buf, pos, ndim, coords, ids) {
  if (buf[pos++] !== TUPLE) return null;
  for (let d = 0; d < ndim; d++) {
    const size = buf[pos++] - INT_ZERO;
    if (size < 0 || size > 6) return null;
    let value = 0;
    for (let k = 0; k < size; k++) value = value * 256 + buf[pos++];
    coords[d] = value;
  }
  if (buf[pos++] !== END || buf[pos++] !== STRING) return null;
  const end = buf.indexOf(0, pos);
  if (end < 0 || end + 1 >= buf.length || buf[end + 1] !== 0) return null;  // the text's END, then the key's
  for (let k = pos; k < end; k++) if (buf[k] >= 0x80) return null;
  return ids.text(buf, pos, end);
}
