// Times as the archive stores them (integers of microseconds since 1970-01-01 UTC) and as people write
// them (RFC 3339 / ISO 8601), as zsarchive/times.py renders and reads them.
import { ZSError } from "../errors.js";

const MIN_MICROS = -62135596800e6;  // 0001-01-01T00:00:00Z, the first instant Python's datetime holds
const MAX_MICROS = 253402300799999999;  // 9999-12-31T23:59:59.999999Z

/**
 * RFC 3339 UTC with microseconds and ``Z``, e.g. ``2026-11-22T01:55:20.495477Z``.
 * @param {number | bigint} micros
 */
export function formatTime(micros) {
  const value = Number(micros);
  if (!Number.isSafeInteger(value) || value < MIN_MICROS || value > MAX_MICROS) {
    throw new RangeError(`time ${micros} is outside the years 1 to 9999`);
  }
  const seconds = Math.floor(value / 1e6);
  const fraction = value - seconds * 1e6;
  const moment = new Date(seconds * 1000);
  const year = String(moment.getUTCFullYear()).padStart(4, "0");
  const two = (/** @type {number} */ n) => String(n).padStart(2, "0");
  return `${year}-${two(moment.getUTCMonth() + 1)}-${two(moment.getUTCDate())}T${two(moment.getUTCHours())}:` +
    `${two(moment.getUTCMinutes())}:${two(moment.getUTCSeconds())}.${String(fraction).padStart(6, "0")}Z`;
}

const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = new RegExp(
  "^(\\d{4})-?(\\d{2})-?(\\d{2})" +
  "(?:T(\\d{2})(?::?(\\d{2})(?::?(\\d{2})(?:[.,](\\d+))?)?)?" +
  "(?:([+-])(\\d{2})(?::?(\\d{2})(?::?(\\d{2})(?:[.,](\\d{1,6}))?)?)?)?)?$");

/**
 * Microseconds since 1970 UTC of a calendar date and time of day, or null if it is no real one.
 * @param {number} y @param {number} mo @param {number} d @param {number} h @param {number} mi @param {number} s
 */
function utcMicros(y, mo, d, h, mi, s) {
  if (y < 1 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || s > 59) return null;
  const moment = new Date(0);
  moment.setUTCFullYear(y, mo - 1, d);
  if (moment.getUTCDate() !== d || moment.getUTCMonth() !== mo - 1) return null;
  return (moment.getTime() / 1000 + h * 3600 + mi * 60 + s) * 1e6;
}

/**
 * ISO 8601 / RFC 3339 text -> microseconds since 1970 UTC: an offset, ``Z`` or none (read as UTC), or a
 * bare date (its first microsecond, or its last with ``endOfDay``, so inclusive upper bounds cover it).
 * @param {string} text @param {boolean} [endOfDay]
 */
export function parseTime(text, endOfDay = false) {
  const value = text.trim();
  const bad = () => new ZSError(`bad time ${JSON.stringify(text)}: expected ISO 8601 / RFC 3339, e.g. ` +
    "2026-11-22T01:19:29Z or 2026-11-22");
  const day = DATE_ONLY.exec(value);
  if (day) {
    const start = utcMicros(Number(day[1]), Number(day[2]), Number(day[3]), 0, 0, 0);
    if (start === null) throw bad();
    return endOfDay ? start + 86400e6 - 1 : start;
  }
  let normal = /[zZ]$/.test(value) ? value.slice(0, -1) + "+00:00" : value;
  if (!normal.includes("T")) normal = normal.replace(" ", "T");
  const m = DATE_TIME.exec(normal);
  if (!m) throw bad();
  const at = utcMicros(Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4] ?? 0), Number(m[5] ?? 0), Number(m[6] ?? 0));
  if (at === null) throw bad();
  const micros = m[7] ? Number(m[7].slice(0, 6).padEnd(6, "0")) : 0;
  let offset = 0;
  if (m[8]) {
    const oh = Number(m[9]), om = Number(m[10] ?? 0), os = Number(m[11] ?? 0);
    if (oh > 23 || om > 59 || os > 59) throw bad();
    offset = ((oh * 60 + om) * 60 + os) * 1e6 + (m[12] ? Number(m[12].padEnd(6, "0")) : 0);
    if (m[8] === "-") offset = -offset;
  }
  return at + micros - offset;
}
