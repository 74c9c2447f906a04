// Unsigned LEB128 integers, shortest form only (ZS forbids redundant encodings). Values are JavaScript
// numbers: every offset and length a reader acts on lies within a file, far below 2**53.
import { ZSCorrupt } from "../errors.js";

/**
 * Decode one uleb128 at ``buf[pos]``: ``[value, next position]``; ZSCorrupt on truncation, a
 * non-shortest form or a value of 2**53 or more (no file is that long).
 * @param {Uint8Array} buf
 * @param {number} pos
 * @param {string} what
 * @returns {[number, number]}
 */
export function decodeUleb128(buf, pos, what = "uleb128") {
  if (pos >= buf.length) throw new ZSCorrupt(`${what} at position ${pos}: truncated`);
  let byte = buf[pos];
  if (byte < 0x80) return [byte, pos + 1];
  const start = pos;
  let value = byte & 0x7f;
  let scale = 128;
  pos += 1;
  for (;;) {
    if (pos >= buf.length) throw new ZSCorrupt(`${what} at position ${start}: truncated`);
    byte = buf[pos++];
    value += (byte & 0x7f) * scale;
    scale *= 128;
    if (byte < 0x80) {
      if (byte === 0) throw new ZSCorrupt(`${what} at position ${start}: not in shortest form`);
      if (value > Number.MAX_SAFE_INTEGER) {
        throw new ZSCorrupt(`${what} at position ${start}: ${value} is beyond what any file holds`);
      }
      return [value, pos];
    }
    if (pos - start >= 10) {
      throw new ZSCorrupt(`${what} at position ${start}: longer than the 10 bytes of a 64-bit value`);
    }
  }
}
