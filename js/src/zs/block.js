// Block framing (uleb128 length, level byte, payload, CRC-64-xz) and the data and index payload layouts.
import { ZSCorrupt } from "../errors.js";
import { crc64, hex64 } from "./crc64.js";
import { decodeUleb128 } from "./uleb128.js";

/** Levels 1-63 are index blocks; 64 and up are extension blocks. */
export const MAX_INDEX_LEVEL = 63;
/** The smallest framed block: one length byte, the level byte and the CRC. */
export const MIN_BLOCK_LENGTH = 10;

/**
 * Byte strings compared as memcmp does (records, keys).
 * @param {Uint8Array} a
 * @param {Uint8Array} b
 * @returns {number}
 */
export function compareBytes(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] !== b[i]) return a[i] - b[i];
  }
  return a.length - b.length;
}

/**
 * Check a whole framed block (length field through CRC): ``[level, compressed payload]``, the
 * payload a view into ``buf``. ``where`` names file and offset in messages.
 * @param {Uint8Array} buf
 * @param {string} where
 * @returns {[number, Uint8Array]}
 */
export function splitBlock(buf, where) {
  const field = buf.subarray(0, 10);
  if (field.every((b) => b & 0x80)) {
    throw new ZSCorrupt(`${where}: block length field ${field.length < 10 ? "runs past the end of its extent"
      : "is longer than 10 bytes"}`);
  }
  let length, pos;
  try {
    [length, pos] = decodeUleb128(field, 0);
  } catch {
    throw new ZSCorrupt(`${where}: block length field is not in shortest uleb128 form`);
  }
  if (length === 0) throw new ZSCorrupt(`${where}: block length is 0 (a block holds at least its level byte)`);
  const end = pos + length;
  if (end + 8 !== buf.length) {
    throw new ZSCorrupt(`${where}: block length field says ${end + 8} bytes with CRC, but ${buf.length} ` +
      "bytes are available for this block");
  }
  const body = buf.subarray(pos, end);
  const [lo, hi] = crc64(body);
  const view = new DataView(buf.buffer, buf.byteOffset + end, 8);
  const storedLo = view.getUint32(0, true), storedHi = view.getUint32(4, true);
  if (storedLo !== lo || storedHi !== hi) {
    throw new ZSCorrupt(`${where}: block CRC mismatch (stored ${hex64(storedLo, storedHi)}, computed ${hex64(lo, hi)})`);
  }
  return [body[0], body.subarray(1)];
}

/**
 * Where each record of a data payload starts and ends (record ``i`` is ``payload[starts[i]:ends[i]]``);
 * ZSCorrupt on bad framing or an empty payload.
 * @param {Uint8Array} payload
 * @param {string} where
 * @returns {{starts: Uint32Array, ends: Uint32Array}}
 */
export function recordSpans(payload, where) {
  let starts = new Uint32Array(64), ends = new Uint32Array(64);
  let count = 0, pos = 0;
  const n = payload.length;
  while (pos < n) {
    let length = payload[pos], start = pos + 1;
    if (length >= 0x80) [length, start] = decodeUleb128(payload, pos, `${where}: record ${count} length`);
    if (count === starts.length) {
      const grown = new Uint32Array(2 * count), grownEnds = new Uint32Array(2 * count);
      grown.set(starts);
      grownEnds.set(ends);
      starts = grown;
      ends = grownEnds;
    }
    starts[count] = start;
    pos = start + length;
    ends[count] = pos;
    count++;
  }
  if (pos > n) {
    throw new ZSCorrupt(`${where}: record ${count - 1} runs past the end of the ${n}-byte payload`);
  }
  if (count === 0) throw new ZSCorrupt(`${where}: data block payload holds no records`);
  return { starts: starts.subarray(0, count), ends: ends.subarray(0, count) };
}

/**
 * @typedef {object} IndexBlock
 * @property {number} level
 * @property {Uint8Array[]} keys
 * @property {number[]} offsets
 * @property {number[]} lengths
 */

/**
 * The entries of an index payload, as three parallel lists; ZSCorrupt on bad framing, an empty
 * payload or keys out of order.
 * @param {Uint8Array} payload
 * @param {number} level
 * @param {string} where
 * @returns {IndexBlock}
 */
export function decodeIndex(payload, level, where) {
  const keys = [], offsets = [], lengths = [];
  let pos = 0;
  const n = payload.length;
  while (pos < n) {
    const i = keys.length;
    let size, offset, length;
    [size, pos] = decodeUleb128(payload, pos, `${where}: index entry ${i} key length`);
    if (pos + size > n) throw new ZSCorrupt(`${where}: index entry ${i} key length ${size} runs past the payload end`);
    keys.push(payload.subarray(pos, pos + size));
    pos += size;
    [offset, pos] = decodeUleb128(payload, pos, `${where}: index entry ${i} offset`);
    [length, pos] = decodeUleb128(payload, pos, `${where}: index entry ${i} length`);
    offsets.push(offset);
    lengths.push(length);
  }
  if (!keys.length) throw new ZSCorrupt(`${where}: index block payload holds no entries`);
  for (let i = 1; i < keys.length; i++) {
    if (compareBytes(keys[i], keys[i - 1]) < 0) {
      throw new ZSCorrupt(`${where}: index keys out of order: entry ${i} sorts before entry ${i - 1}`);
    }
  }
  return { level, keys, offsets, lengths };
}
