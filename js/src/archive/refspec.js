// Parsing of REF and TIME arguments (``main``, ``tag:v1``, ``main@2026-11-22T01:19:29Z``), as
// zsarchive/archive/read/refspec.py parses them.
import { ZSError } from "../errors.js";
import { parseTime } from "./times.js";

const KINDS = ["branch", "tag", "snapshot"];

/**
 * @typedef {{kind: string | null, name: string, asOf: number | null, text: string}} RefSpec
 */

/**
 * ``[branch:|tag:|snapshot:]NAME[@TIME]`` (the last ``@`` starts the time); ``withTime`` false reads every
 * ``@`` as part of NAME (ref names may hold ``@``: a resolver tries that reading first).
 * @param {string} text @param {boolean} [withTime]
 * @returns {RefSpec}
 */
export function parseRef(text, withTime = true) {
  if (!text) throw new ZSError("empty REF: give a branch, a tag or a snapshot id");
  let body = text, asOf = null;
  if (withTime && text.includes("@")) {
    const at = text.lastIndexOf("@");
    body = text.slice(0, at);
    asOf = parseTime(text.slice(at + 1), true);
  }
  let kind = null;
  const colon = body.indexOf(":");
  if (colon >= 0 && KINDS.includes(body.slice(0, colon))) {
    kind = body.slice(0, colon);
    body = body.slice(colon + 1);
  }
  if (!body) throw new ZSError(`bad REF ${JSON.stringify(text)}: no name`);
  return { kind, name: body, asOf, text };
}

/**
 * A query's time bound as microseconds: TIME text (``upper``: a bare date means the end of that day), a
 * Date, or microseconds since 1970 UTC.
 * @param {string | number | Date | null | undefined} value @param {boolean} upper
 * @returns {number | null}
 */
export function timeBound(value, upper) {
  if (value === null || value === undefined || value === "") return null;
  if (typeof value === "number" && Number.isInteger(value)) return value;
  if (typeof value === "string") return parseTime(value, upper);
  if (value instanceof Date) return value.getTime() * 1000;
  throw new ZSError(`bad time ${String(value)}: give TIME text, a Date or microseconds since 1970`);
}

/**
 * Chunk coordinates a caller gave (integers >= 0, or their text ``1,2``; "" is a 0-d array's) as a list.
 * @param {unknown} value @param {string} [what]
 * @returns {number[]}
 */
export function chunkCoords(value, what = "coords") {
  const items = typeof value === "string" ? (value.trim() ? value.split(",").map((c) => Number(c.trim())) : []) : value;
  if (!Array.isArray(items) || !items.every((c) => Number.isSafeInteger(c) && c >= 0)) {
    throw new ZSError(`${what} must be integers >= 0, not ${JSON.stringify(value)}`);
  }
  return items;
}

/** Chunk coordinates as ``1,2,3`` (for messages). @param {Array<number | bigint>} coords */
export const coordsText = (coords) => coords.join(",");

/**
 * Text compared by code point, as Python compares str (JavaScript's < compares UTF-16 code units, which
 * orders characters beyond U+FFFF before U+E000..U+FFFF).
 * @param {string} a @param {string} b
 */
export function compareText(a, b) {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i), y = b.codePointAt(i);
    if (x !== y) return /** @type {number} */ (x) - /** @type {number} */ (y);
    if (/** @type {number} */ (x) > 0xffff) i++;
  }
  return a.length - b.length;
}

/**
 * What to say after "not found": the candidates when they are few.
 * @param {string[]} candidates @param {string} noun
 */
export function hint(candidates, noun) {
  const names = [...new Set(candidates)].sort(compareText);
  return names.length && names.length <= 8 ? `; the ${noun} are: ${names.join(", ")}` : "";
}
