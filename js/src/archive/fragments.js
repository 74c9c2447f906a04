// Fragments (format 4): what a fragment's header record says it holds, and its chunk ref filter
// (docs/archive-format.rst, "Fragments").
import { ZSCorrupt } from "../errors.js";
import { blake2b } from "./blake2b.js";
import { FAMILY_NAMES } from "./schema.js";

/** Most archives one chain holds, the full archive at its root included. */
export const MAX_CHAIN = 64;
const FILTER_HASHES = 7;
const FIRST_KEYED = new Set(["chunk refs", "chunk history", "children", "nodes", "snapshots", "transaction logs"]);
const RECORDS_FORMATS = new Set([2, 3, 5, 6, 7]);

/** A Bloom filter over the (node id, coords) prefixes of a fragment's chunk ref keys. */
export class ChunkFilter {
  /** @param {Uint8Array} bits */
  constructor(bits) {
    this.bits = bits;
    this.size = BigInt(8 * bits.length);
  }

  /** False only when no key of the fragment starts with ``prefix``. @param {Uint8Array} prefix */
  mayHold(prefix) {
    const digest = blake2b(prefix, 16);
    const view = new DataView(digest.buffer);
    const h1 = view.getBigUint64(0, true), h2 = view.getBigUint64(8, true) | 1n;
    for (let i = 0n; i < BigInt(FILTER_HASHES); i++) {
      const at = Number((h1 + i * h2) % this.size);
      if (!(this.bits[at >> 3] & (1 << (at & 7)))) return false;
    }
    return true;
  }
}

/**
 * @typedef {{records: number, tombstones: number, firsts: Set<string> | null}} Holding
 */

/** What a fragment's header record says beyond a full archive's. */
export class FragmentInfo {
  /**
   * @param {[number, number]} covers @param {number} recordsFormat @param {Map<string, Holding>} holdings
   * @param {ChunkFilter | null} chunkFilter
   */
  constructor(covers, recordsFormat, holdings, chunkFilter) {
    this.covers = covers;
    this.recordsFormat = recordsFormat;
    this.holdings = holdings;
    this.chunkFilter = chunkFilter;
  }

  /**
   * Read the sixth element of a fragment's header record; ZSCorrupt naming ``where`` when malformed.
   * @param {any} element @param {string} where
   */
  static decode(element, where) {
    const tags = Object.fromEntries(Object.entries(FAMILY_NAMES).map(([tag, name]) => [name, tag]));
    const fail = (/** @type {string} */ what) => new ZSCorrupt(`${where}: malformed fragment description in the header record (${what})`);
    if (!Array.isArray(element) || element.length !== 5) throw fail("not five elements");
    const [start, stop, recordsFormat, bits, families] = element;
    if (!(bits === null || (bits instanceof Uint8Array && bits.length))) throw fail("chunk ref filter");
    if (!RECORDS_FORMATS.has(recordsFormat)) throw fail(`format version ${recordsFormat} of the view`);
    if (!Array.isArray(families)) throw fail("families");
    /** @type {Map<string, Holding>} */
    const holdings = new Map();
    for (const entry of families) {
      if (!Array.isArray(entry) || entry.length !== 4) throw fail("family entry");
      const [name, records, dead, firsts] = entry;
      if (!(name in tags) || !Number.isInteger(records) || !Number.isInteger(dead) || records < 0 || dead < 0 ||
          dead > records || !(firsts === null || Array.isArray(firsts))) {
        throw fail(`family entry ${JSON.stringify(String(name))}`);
      }
      if ((firsts === null) === FIRST_KEYED.has(name)) {
        throw fail(`family ${JSON.stringify(name)} lists first key elements where it should not, or not where it should`);
      }
      holdings.set(tags[name], { records, tombstones: dead, firsts: firsts === null ? null : new Set(firsts) });
    }
    if (!Number.isInteger(start) || !Number.isInteger(stop)) throw fail("time range");
    return new FragmentInfo([start, stop], recordsFormat, holdings, bits === null ? null : new ChunkFilter(bits));
  }
}
