// The ZS file header (ZS v0.10 and its header supplement): magic, header length, root index extent,
// file length, SHA-256 of the data, codec, JSON metadata, extensions, header CRC.
import { ZSCorrupt } from "../errors.js";
import { crc64, hex64 } from "./crc64.js";
import { MIN_BLOCK_LENGTH } from "./block.js";
import { CODECS } from "./codecs.js";
import { MAX_BLOCK, MAX_FRAMED_BLOCK } from "../limits.js";

const MAGIC = [0xab, 0x5a, 0x53, 0x66, 0x69, 0x4c, 0x65, 0x01];
const PARTIAL_MAGIC = [0xab, 0x5a, 0x53, 0x74, 0x6f, 0x42, 0x65, 0x01];
/** Magic and header length: the bytes before the header data. */
export const PREFIX_LENGTH = 16;
const FIXED = 8 + 8 + 8 + 32 + 16 + 8;
const CODEC_AT = 72;
const METADATA_AT = PREFIX_LENGTH + FIXED;

/**
 * @typedef {object} Header
 * @property {number} rootIndexOffset
 * @property {number} rootIndexLength
 * @property {number} totalFileLength
 * @property {Uint8Array} dataSha256
 * @property {string} codec
 * @property {Record<string, unknown>} metadata
 * @property {Uint8Array} extensions
 */

/**
 * A little-endian u64 as a number (exact below 2**53; beyond, no file is that long and checks fail).
 * @param {Uint8Array} buf
 * @param {number} at
 */
export function u64(buf, at) {
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  return view.getUint32(at, true) + view.getUint32(at + 4, true) * 2 ** 32;
}

/**
 * Check the 16-byte prefix of a ``size``-byte file; return where the blocks start (the header's end).
 * @param {Uint8Array} prefix
 * @param {number} size
 * @param {string} name
 */
export function headerEnd(prefix, size, name) {
  const magic = Array.from(prefix.subarray(0, 8));
  if (magic.length < 8) {
    throw new ZSCorrupt(`${name}: offset 0: file is ${magic.length} bytes, too short to be a ZS file`);
  }
  if (PARTIAL_MAGIC.every((b, i) => magic[i] === b)) {
    throw new ZSCorrupt(`${name}: offset 0: ZStoBe magic: this file was only partially written ` +
      "(the writer was interrupted or failed); it is not a valid ZS file");
  }
  if (!MAGIC.every((b, i) => magic[i] === b)) {
    const hex = magic.map((b) => b.toString(16).padStart(2, "0")).join("");
    throw new ZSCorrupt(`${name}: offset 0: bad magic ${hex}: not a ZS file`);
  }
  if (prefix.length < PREFIX_LENGTH) {
    throw new ZSCorrupt(`${name}: offset 8: file ends inside the header length field`);
  }
  const length = u64(prefix, 8);
  if (length < FIXED) {
    throw new ZSCorrupt(`${name}: offset 8: header length ${length} is shorter than the ${FIXED} bytes ` +
      "of fixed header fields");
  }
  const end = PREFIX_LENGTH + length + 8;
  if (end > size) {
    throw new ZSCorrupt(`${name}: offset 8: header length ${length} runs past the end of the ${size}-byte file`);
  }
  return end;
}

/**
 * Decode the header of a ``size``-byte file from its first bytes (at least up to the header's end):
 * everything the header alone can say is checked (magic, CRC, fields, a known codec, the file's
 * length, a root extent inside the blocks area).
 * @param {Uint8Array} head
 * @param {number} size
 * @param {string} name
 * @returns {[Header, number]} the header and where the blocks start
 */
export function parseHeader(head, size, name) {
  const end = headerEnd(head.subarray(0, PREFIX_LENGTH), size, name);
  if (head.length < end) throw new ZSCorrupt(`${name}: offset ${head.length}: file ends inside the header`);
  const data = head.subarray(PREFIX_LENGTH, end - 8);
  const [lo, hi] = crc64(data);
  const view = new DataView(head.buffer, head.byteOffset + end - 8, 8);
  if (view.getUint32(0, true) !== lo || view.getUint32(4, true) !== hi) {
    throw new ZSCorrupt(`${name}: offset ${end - 8}: header CRC mismatch (stored ` +
      `${hex64(view.getUint32(0, true), view.getUint32(4, true))}, computed ${hex64(lo, hi)})`);
  }
  const codecBytes = data.subarray(56, 72);
  let codecEnd = codecBytes.length;
  while (codecEnd > 0 && codecBytes[codecEnd - 1] === 0) codecEnd--;
  const raw = codecBytes.subarray(0, codecEnd);
  if (raw.some((b) => b >= 0x80)) throw new ZSCorrupt(`${name}: offset ${CODEC_AT}: codec field is not ASCII`);
  const codec = String.fromCharCode(...raw);
  const metaLength = u64(data, 72);
  if (FIXED + metaLength > data.length) {
    throw new ZSCorrupt(`${name}: offset 88: metadata length ${metaLength} runs past the end of the ` +
      `${data.length}-byte header`);
  }
  let metadata;
  try {
    metadata = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(data.subarray(FIXED, FIXED + metaLength)));
  } catch (err) {
    throw new ZSCorrupt(`${name}: offset ${METADATA_AT}: metadata is not UTF-8 JSON: ${err.message}`);
  }
  if (metadata === null || typeof metadata !== "object" || Array.isArray(metadata)) {
    throw new ZSCorrupt(`${name}: offset ${METADATA_AT}: metadata is JSON but not an object`);
  }
  if (!(codec in CODECS)) {
    throw new ZSCorrupt(`${name}: offset ${CODEC_AT}: unknown codec ${JSON.stringify(codec)} ` +
      "(known: none, deflate, lzma2;dsize=2^20, zstd)");
  }
  const header = {
    rootIndexOffset: u64(data, 0), rootIndexLength: u64(data, 8), totalFileLength: u64(data, 16),
    dataSha256: data.slice(24, 56), codec, metadata, extensions: data.slice(FIXED + metaLength),
  };
  if (header.totalFileLength !== size) {
    throw new ZSCorrupt(`${name}: offset 32: header says the file is ${header.totalFileLength} bytes, ` +
      `but it is ${size} bytes (truncated or appended to)`);
  }
  const { rootIndexOffset: offset, rootIndexLength: length } = header;
  if (!(end <= offset && MIN_BLOCK_LENGTH <= length && offset + length <= size)) {
    throw new ZSCorrupt(`${name}: offset 16: root index block (${length} bytes at offset ${offset}) lies ` +
      `outside the block region ${end}..${size}`);
  }
  if (length > MAX_FRAMED_BLOCK) {
    throw new ZSCorrupt(`${name}: offset 24: root index block of ${length} bytes: no block that decodes within the ` +
      `ceiling of ${MAX_BLOCK} bytes is that long`);
  }
  return [header, end];
}
