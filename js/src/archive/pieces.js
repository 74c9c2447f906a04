// Chunk bytes embedded in an archive (family D): whole files (record version 1, formats 1 and 2) or
// pieces keyed (chunk id, offset of the piece's first byte) (record version 2, format 3 on); and the bytes
// of virtual chunk refs (family E, format 7): pieces keyed (location, offset, length, etag, last_modified,
// offset of the piece's first byte), or an alias naming another checksum of the same range.
import { ZSCorrupt, ZSError } from "../errors.js";
import { decodeUleb128 } from "../zs/uleb128.js";
import { CHUNK_DATA, VIRTUAL_DATA, keyPrefix, split } from "./schema.js";
import { BLOB, decode } from "./tuples.js";

/**
 * ``[key, bytes]`` of a piece record (a view into ``record``): a D record version 1 holds the whole file,
 * key ``[chunk id, 0]``; an E alias (five key elements) gives ``[key, value]`` instead.
 * @param {Uint8Array} record @param {string} where
 * @returns {[any[], Uint8Array | any[]]}
 */
function splitPiece(record, where) {
  const family = String.fromCharCode(record[0]);
  const size = family === VIRTUAL_DATA ? 6 : 2;
  const [key, pos] = decode(record, 1, record.length, `${where}: piece record key`);
  if (pos >= record.length || (key.length !== size && key.length !== size - 1) || typeof key[0] !== "string") {
    throw new ZSCorrupt(`${where}: piece record is malformed`);
  }
  const version = record[pos];
  if (key.length === size - 1) {
    if (family === CHUNK_DATA && version === 1) return [[key[0], 0], /** @type {Uint8Array} */ (split(record)[2][0])];
    if (family === VIRTUAL_DATA && version === 1) return [key, split(record)[2]];
    throw new ZSCorrupt(`${where}: piece record is malformed`);
  }
  if (version !== (family === VIRTUAL_DATA ? 1 : 2) || !Number.isInteger(key[size - 1]) || record[pos + 1] !== BLOB) {
    throw new ZSCorrupt(`${where}: piece record is malformed`);
  }
  const [length, at] = decodeUleb128(record, pos + 2, `${where}: piece record length`);
  if (at + length !== record.length) {
    throw new ZSCorrupt(`${where}: piece record holds ${record.length - at} bytes, its length says ${length}`);
  }
  return [key, record.subarray(at)];
}

/**
 * The pieces of ``owner`` (the key elements before a piece's start) that a lookup of bytes ``[start, stop)``
 * finds, as ``[start, bytes]``, and every record it found as ``[key, bytes or value]``.
 * @param {any} zs @param {string} family @param {any[]} owner @param {number} start @param {number} stop
 * @param {string} where
 */
async function owned(zs, family, owner, start, stop, where) {
  const lower = keyPrefix(family, [...owner, start]);
  const before = new Uint8Array(lower.length + 1);
  before.set(lower);
  before[lower.length] = 0x01;
  const upper = keyPrefix(family, [...owner, Math.max(stop, start + 1)]);
  const end = new Uint8Array(upper.length + 1);
  end.set(upper);
  // the record before the lookup may be of the family before (the first piece of the family is later)
  const found = (await zs.floorSpan(before, end)).filter((/** @type {Uint8Array} */ r) => r[0] === family.charCodeAt(0))
    .map((/** @type {Uint8Array} */ r) => splitPiece(r, where));
  const n = owner.length;
  const same = (/** @type {any[]} */ key) => key.length === n + 1 && owner.every((e, i) => e === key[i]);
  return { pieces: found.filter(([key]) => same(key)).map(([key, data]) => [key[n], data]), found };
}

/**
 * Bytes [start, stop) of ``pieces`` (``[start, bytes]``, in order), which must hold them without gap.
 * @param {any[]} pieces @param {number} start @param {number} stop @param {string} where
 */
function joined(pieces, start, stop, where) {
  let at = pieces[0][0];
  if (at > start) throw new ZSCorrupt(`${where}: no piece holds byte ${start} (the first piece found starts at ${at})`);
  for (const [pieceStart, data] of pieces) {
    if (pieceStart !== at) throw new ZSCorrupt(`${where}: pieces leave a gap: bytes from ${at} to ${pieceStart} are missing`);
    at += data.length;
  }
  if (at < stop) {
    throw new ZSCorrupt(`${where}: no piece holds bytes ${at} to ${stop} (a damaged archive, or a ref past the end of the file)`);
  }
  const first = pieces[0][0];
  if (pieces.length === 1) return pieces[0][1].slice(start - first, stop - first);
  const out = new Uint8Array(stop - start);
  let pos = first;
  for (const [, data] of pieces) {
    const lo = Math.max(start, pos), hi = Math.min(stop, pos + data.length);
    if (hi > lo) out.set(data.subarray(lo - pos, hi - pos), lo - start);
    pos += data.length;
  }
  return out;
}

/**
 * Bytes [start, stop) of an embedded chunk file, or null if the archive does not embed it.
 * @param {any} zs a ZS or a Chain @param {string} chunkId @param {number} start @param {number} stop
 */
export async function readPieces(zs, chunkId, start, stop) {
  const where = `${zs.name}: embedded chunk ${chunkId}`;
  const { pieces } = await owned(zs, CHUNK_DATA, [chunkId], start, stop, where);
  return pieces.length ? joined(pieces, start, stop, where) : null;
}

/**
 * Bytes [start, stop) of the object a virtual range's key ``[location, offset, length, etag, last_modified]``
 * names, from the archive's E records (following an alias to the checksum whose pieces hold them), or
 * null if the archive does not keep that range (format 7).
 * @param {any} zs a ZS or a Chain @param {any[]} key @param {number} start @param {number} stop
 */
export async function readVirtual(zs, key, start, stop) {
  const where = `${zs.name}: embedded virtual range ${key[0]} [${key[1]}, ${key[1] + key[2]})`;
  if (!(key[1] <= start && start <= stop && stop <= key[1] + key[2])) {
    throw new ZSError(`${where}: bytes [${start}, ${stop}) lie outside the range`);
  }
  let { pieces, found } = await owned(zs, VIRTUAL_DATA, key, start, stop, where);
  if (!pieces.length) {
    const alias = found.find(([k]) => k.length === 5 && key.every((e, i) => e === k[i]));
    if (alias === undefined) return null;
    const value = /** @type {any[]} */ (alias[1]);
    if (value.length < 2 || !(value[0] === null || typeof value[0] === "string") ||
        !(value[1] === null || Number.isInteger(value[1]))) {
      throw new ZSCorrupt(`${where}: its alias is not a checksum (etag or null, time or null)`);
    }
    const target = [key[0], key[1], key[2], value[0], value[1]];
    if (target[3] === key[3] && target[4] === key[4]) throw new ZSCorrupt(`${where}: its alias names itself`);
    ({ pieces } = await owned(zs, VIRTUAL_DATA, target, start, stop, where));
    if (!pieces.length) {
      throw new ZSCorrupt(`${where}: its alias names checksum ${JSON.stringify(value.slice(0, 2))}, whose range the archive does not hold`);
    }
  }
  return joined(pieces, start, stop, where);
}
