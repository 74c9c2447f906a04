// The archive's record layout (docs/archive-format.rst): a record is ``family tag (1 byte) + key
// elements + 0x00 + record version (1 byte) + value elements``.
import { ZSCorrupt, ZSError } from "../errors.js";
import { decode, encode, keyEnd } from "./tuples.js";

/** The newest archive format this reader reads (format 4 is a fragment, read with its chain). */
export const FORMAT_VERSION = 7;
export const FRAGMENT_FORMAT = 4;
/** Key of the object in the ZS header metadata that marks a file as a repo archive. */
export const METADATA_KEY = "icechunk-archive";

export const REFS = "B", CHUNK_REF = "C", CHUNK_DATA = "D", VIRTUAL_DATA = "E", REPO = "G", CHUNK_HISTORY = "H", SHARD_INDEX = "I";
export const CHILDREN = "L", NODE = "N", OPS = "O", SNAPSHOT = "S", SNAPSHOT_TIME = "T", TXLOG = "X", FILES = "Y";
export const HEADER = "Z";

/** Family tag -> the name the header's counts use. */
export const FAMILY_NAMES = {
  B: "refs", C: "chunk refs", D: "chunk data", E: "virtual chunk data", Y: "file headers", G: "repo facts", H: "chunk history",
  I: "shard indexes", L: "children", N: "nodes", O: "ops log", S: "snapshots", T: "snapshots by time",
  X: "transaction logs", Z: "archive header",
};

/** The newest record version of each family this reader reads (every older one is read too). */
const RECORD_VERSIONS = { B: 1, C: 2, D: 2, E: 1, Y: 1, G: 1, H: 2, I: 1, L: 1, N: 1, O: 1, S: 1, T: 1, X: 2, Z: 1 };

/** Chunk ref kinds: the first value element of a C record; REMOVED only in record version 2. */
export const INLINE = 0, NATIVE = 1, VIRTUAL = 2, REMOVED = 3;
export const KIND_NAMES = ["inline", "native", "virtual"];
export const GROUP = 0, ARRAY = 1;

/**
 * The bytes every record of ``family`` whose key starts with ``key`` starts with.
 * @param {string} family @param {import("./tuples.js").Element[]} [key]
 */
export function keyPrefix(family, key = []) {
  const body = encode(key);
  const out = new Uint8Array(body.length + 1);
  out[0] = family.charCodeAt(0);
  out.set(body, 1);
  return out;
}

/**
 * The first byte past every record of ``family``.
 * @param {string} family
 */
export function familyStop(family) {
  return Uint8Array.of(family.charCodeAt(0) + 1);
}

/**
 * A record's ``[family, key, value, version]``; ZSError if its version is newer than this reader's.
 * @param {Uint8Array} rec
 * @returns {[string, import("./tuples.js").Element[], import("./tuples.js").Element[], number]}
 */
export function split(rec) {
  const family = String.fromCharCode(rec[0]);
  const shown = () => JSON.stringify(String.fromCharCode(...rec.subarray(0, 40)));
  if (!(family in RECORD_VERSIONS)) throw new ZSCorrupt(`record ${shown()}: unknown record family ${JSON.stringify(family)}`);
  const name = FAMILY_NAMES[family];
  const [key, pos] = decode(rec, 1, rec.length, `${name} record key`);
  if (pos >= rec.length || rec[pos - 1] !== 0) throw new ZSCorrupt(`${name} record ${shown()}: key not terminated`);
  const version = rec[pos];
  if (!(version >= 1 && version <= RECORD_VERSIONS[family])) {
    if (version > RECORD_VERSIONS[family]) {
      throw new ZSError(`${name} record ${shown()} has record version ${version}, newer than this reader reads ` +
        `(${RECORD_VERSIONS[family]}): upgrade zsarchive`);
    }
    throw new ZSCorrupt(`${name} record ${shown()}: invalid record version ${version}`);
  }
  const [value] = decode(rec, pos + 1, rec.length, `${name} record value`);
  return [family, key, value, version];
}

/**
 * Whether a record is a tombstone (record version 0, no value).
 * @param {Uint8Array} rec
 */
export function isTombstone(rec) {
  const end = keyEnd(rec);
  return rec.length > end && rec[end] === 0;
}

/**
 * ``/a/b`` -> ["a", "b"]; ``/`` -> [].
 * @param {string} path
 */
export function pathComponents(path) {
  if (path === "" || path === "/") return [];
  return path.replace(/^\/+|\/+$/g, "").split("/");
}

/**
 * Inverse of pathComponents.
 * @param {string[]} components
 */
export function pathOf(components) {
  return "/" + components.join("/");
}
