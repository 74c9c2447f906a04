// Chunk bytes embedded in an archive (family D): whole files (record version 1, formats 1 and 2) or
// pieces keyed (chunk id, offset of the piece's first byte) (record version 2, format 3 on).
import { ZSCorrupt } from "../errors.js";
import { decodeUleb128 } from "../zs/uleb128.js";
import { CHUNK_DATA, keyPrefix, split } from "./schema.js";
import { BLOB, decode } from "./tuples.js";

const HEAD_MAX = 64;  // a piece record's key and value header fit in this many bytes

/**
 * ``[chunk id, start, bytes]`` of a piece record (a record version 1 holds the whole file at start 0).
 * @param {Uint8Array} record @param {string} where
 * @returns {[string, number, Uint8Array]}
 */
function splitPiece(record, where) {
  const head = record.subarray(0, HEAD_MAX);
  const [key, pos] = decode(head, 1, head.length, `${where}: chunk data record key`);
  if (pos >= head.length || !key.length || typeof key[0] !== "string") throw new ZSCorrupt(`${where}: chunk data record is malformed`);
  const version = head[pos];
  if (version === 1 && key.length === 1) return [key[0], 0, /** @type {Uint8Array} */ (split(record)[2][0])];
  if (version !== 2 || key.length !== 2 || !Number.isInteger(key[1]) || head[pos + 1] !== BLOB) {
    throw new ZSCorrupt(`${where}: chunk data record is malformed`);
  }
  const [length, at] = decodeUleb128(head, pos + 2, `${where}: chunk data record length`);
  if (at + length !== record.length) {
    throw new ZSCorrupt(`${where}: chunk data record holds ${record.length - at} bytes, its length says ${length}`);
  }
  return [key[0], /** @type {number} */ (key[1]), record.subarray(at)];
}

/**
 * Bytes [start, stop) of an embedded chunk file, or null if the archive does not embed it.
 * @param {any} zs a ZS or a Chain @param {string} chunkId @param {number} start @param {number} stop
 */
export async function readPieces(zs, chunkId, start, stop) {
  const where = `${zs.name}: embedded chunk ${chunkId}`;
  const lower = keyPrefix(CHUNK_DATA, [chunkId, start]);
  const before = new Uint8Array(lower.length + 1);
  before.set(lower);
  before[lower.length] = 0x01;
  const upper = keyPrefix(CHUNK_DATA, [chunkId, Math.max(stop, start + 1)]);
  const end = new Uint8Array(upper.length + 1);
  end.set(upper);
  const pieces = (await zs.floorSpan(before, end)).map((/** @type {Uint8Array} */ r) => splitPiece(r, where))
    .filter(([id]) => id === chunkId);
  if (!pieces.length) return null;
  let at = pieces[0][1];
  if (at > start) throw new ZSCorrupt(`${where}: no piece holds byte ${start} (the first piece found starts at ${at})`);
  for (const [, pieceStart, data] of pieces) {
    if (pieceStart !== at) throw new ZSCorrupt(`${where}: pieces leave a gap: bytes from ${at} to ${pieceStart} are missing`);
    at += data.length;
  }
  if (at < stop) {
    throw new ZSCorrupt(`${where}: no piece holds bytes ${at} to ${stop} (a damaged archive, or a ref past the end of the file)`);
  }
  const first = pieces[0][1];
  if (pieces.length === 1) return pieces[0][2].slice(start - first, stop - first);
  const out = new Uint8Array(stop - start);
  let pos = first;
  for (const [, , data] of pieces) {
    const lo = Math.max(start, pos), hi = Math.min(stop, pos + data.length);
    if (hi > lo) out.set(data.subarray(lo - pos, hi - pos), lo - start);
    pos += data.length;
  }
  return out;
}
