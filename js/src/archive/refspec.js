// Parsing of REF and TIME arguments (``main``, ``tag:v1``, ``main@2026-11-22T01:19:29Z``), as
// zsarchive/archive/read/refspec.py parses them.
import { ZSError } from "../errors.js";
import { parseTime } from "./times.js";

const KINDS = ["branch", "tag", "snapshot"];

/**
 * A parsed REF: the optional kind, the name or id, the text as given, and its suffixes in order:
 * ``["~", n]`` (n parents back) and ``["@", micros]`` (as of a time).
 * @typedef {{kind: string | null, name: string, text: string, steps: Array<["~" | "@", number]>}} RefSpec
 */

/** One suffix: ``~N``, ``~``, ``^``, ``^N`` or ``@TIME`` (a TIME holds none of ``@~^``). */
const SUFFIX = /~(\p{Nd}*)|\^(\p{Nd}*)|@([^@~^]+)/gu;
/** Digits of a ``~N`` read as a number; more name a depth beyond any history all the same. */
const MAX_DIGITS = 18;

/**
 * Every split of ``text`` into a NAME and suffixes (``~N``, ``^``, ``@TIME``), the whole text as the name
 * first, then shorter names: ref names may hold ``~``, ``^`` and ``@`` themselves, and a resolver takes the
 * first reading whose name exists.
 * @param {string} text
 * @returns {Array<[string, string]>}
 */
export function refReadings(text) {
  if (!text) throw new ZSError("empty REF: give a branch, a tag or a snapshot id");
  const starts = new Set([text.length]);  // where the rest of the text reads as suffixes only, found from the end
  for (const found of [...text.matchAll(SUFFIX)].reverse()) {  // every ~, ^ and @ starts the one suffix it can
    if (starts.has(/** @type {number} */ (found.index) + found[0].length)) starts.add(/** @type {number} */ (found.index));
  }
  const cuts = [...starts].filter((at) => at !== 0 && at !== text.length).sort((a, b) => b - a);
  return [[text, ""], ...cuts.map((at) => /** @type {[string, string]} */ ([text.slice(0, at), text.slice(at)]))];
}

/**
 * ``[branch:|tag:|snapshot:]NAME`` followed by ``suffixes``; without ``suffixes`` the shortest reading of
 * refReadings is taken. Suffixes apply left to right; ``^`` is ``~1``, ``^0`` the snapshot itself, and a
 * snapshot has one parent, so ``^2`` and beyond name none.
 * @param {string} text @param {string | null} [suffixes]
 * @returns {RefSpec}
 */
export function parseRef(text, suffixes = null) {
  let body;
  if (suffixes === null) [body, suffixes] = refReadings(text)[refReadings(text).length - 1];
  else body = text.slice(0, text.length - suffixes.length);
  /** @type {Array<["~" | "@", number]>} */
  const steps = [];
  for (const [, tilde, caret, when] of suffixes.matchAll(SUFFIX)) {
    if (when !== undefined) {
      steps.push(["@", parseTime(when, true)]);
      continue;
    }
    const digits = tilde !== undefined ? tilde : caret;
    const count = !digits ? 1 : digits.length <= MAX_DIGITS && /^[0-9]+$/.test(digits) ? Number(digits) : 10 ** MAX_DIGITS;
    if (caret !== undefined && count > 1) {
      throw new ZSError(`bad REF ${JSON.stringify(text)}: a snapshot has one parent, so ^${digits} names none ` +
        `(~${digits} is ${count} parents back)`);
    }
    if (count) steps.push(["~", count]);
  }
  let kind = null;
  const colon = body.indexOf(":");
  if (colon >= 0 && KINDS.includes(body.slice(0, colon))) {
    kind = body.slice(0, colon);
    body = body.slice(colon + 1);
  }
  if (!body) throw new ZSError(`bad REF ${JSON.stringify(text)}: no name`);
  return { kind, name: body, text, steps };
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
